"""The first line a new user sees is not TFDS's 'Variant folder ... has no dataset_info.json'
(logged with the file name as an argument, so only the formatted text names it)."""

import logging

from chinchax.sweeps import console


def _record(msg, *args):
  return logging.LogRecord("absl", logging.WARNING, __file__, 1, msg, args, None)


def test_tfds_variant_folder_warning_is_hidden():
  once = console._Once()  # pylint: disable=protected-access
  assert not once.filter(_record("Variant folder %s has no %s", "/d/1.0.0", "dataset_info.json"))
  assert once.hidden == 1
  assert once.filter(_record("Variant folder %s has invalid version %s", "/d/x", "x"))
