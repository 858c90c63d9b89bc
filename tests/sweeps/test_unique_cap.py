"""`data.unique_tokens_cap` restricts the unique pool to the train stream's first U tokens."""

from chinchax.sweeps import data
from chinchax.sweeps.train import config as run_config


def test_cap_restricts_the_pool_to_a_prefix(tiny_config):
  c = tiny_config
  full = data.open_dataset(run_config.data_config(c))
  c.data.unique_tokens_cap = 5000
  capped = data.open_dataset(run_config.data_config(c))
  assert capped.unique_tokens == 5000 < full.unique_tokens
  assert (capped.train[:] == full.train[:5000]).all()
  D = 40 * c.batch_size * c.seq_len
  assert capped.epochs_for(D) == D / ((5000 - 1) // c.seq_len * c.seq_len)
