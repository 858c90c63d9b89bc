"""chinchax input pipeline: TFDS text corpora (array_record, no TensorFlow), tokenizers,
packing with a (seed, step)-addressable sample order, and multi-host batch assembly."""

from chinchax.sweeps.data.pipeline import DataConfig
from chinchax.sweeps.data.pipeline import Dataset
from chinchax.sweeps.data.pipeline import eval_batch
from chinchax.sweeps.data.pipeline import eval_batches
from chinchax.sweeps.data.pipeline import eval_bytes
from chinchax.sweeps.data.pipeline import n_eval_batches
from chinchax.sweeps.data.pipeline import open_dataset
from chinchax.sweeps.data.pipeline import open_split
from chinchax.sweeps.data.pipeline import SPLITS
from chinchax.sweeps.data.pipeline import train_batch
from chinchax.sweeps.data.pipeline import with_config
from chinchax.sweeps.data.tokenizers import check_vocab
from chinchax.sweeps.data.tokenizers import make_tokenizer
from chinchax.sweeps.data.multihost import check_batch
from chinchax.sweeps.data.multihost import global_batch
from chinchax.sweeps.data.multihost import global_chunk
from chinchax.sweeps.data.multihost import global_eval_batch
