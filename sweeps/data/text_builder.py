"""A TFDS builder for plain-text corpora on disk, written as array_record without TensorFlow.

A corpus is a directory (every non-hidden file under it, recursively) or a glob
(`/data/books/**/*.txt`). One file is one document: the feature dict is
`{"text": <file contents>, "path": <path relative to the corpus root>}`.

Split: a document goes to `validation` iff

    u = int(sha256(relpath + "\\0" + content_bytes)[:8]) / 2**64  <  val_fraction

so the split depends only on the document (its path relative to the corpus root and its bytes),
never on the machine, the file system's listing order or the run. Empty files and files that are
not valid UTF-8 are skipped (a token stream of `U+FFFD` is not text).

The default corpus `stdlib` is the `*.py` source of the running interpreter's standard library
(`sysconfig.get_paths()["stdlib"]`), excluding `site-packages`, `dist-packages`, `__pycache__`
and test directories (`test`, `tests`, `idle_test`): ~12 MB of real text on any machine with
Python, no download.

The TFDS dataset is named `chinchax_text/<config>` where `<config>` is a slug of the corpus
plus a fingerprint of its file list and sizes, so a changed corpus gets a new dataset and an
unchanged one is built once per `data_dir` and reused. The builder is not registered with TFDS:
a prepared dataset is read back by name (`tfds.data_source("chinchax_text/<config>",
data_dir=...)`) through TFDS's read-only builder, exactly like any named TFDS dataset.
TFDS writes array_record through its own Python writer; `tensorflow` is never imported.
"""

import contextlib
import dataclasses
import glob
import hashlib
import io
import os
import re
import sysconfig

import tensorflow_datasets as tfds

from chinchax.errors import UserError

NAME = "chinchax_text"
_VERSION = "1.0.0"
STDLIB = "stdlib"
_STDLIB_EXCLUDE = frozenset(
    {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"})


@dataclasses.dataclass(frozen=True)
class Corpus:
  """Which files make the corpus. `files` are absolute; `root` anchors their relative paths."""
  slug: str
  root: str
  files: tuple[str, ...]


def find_corpus(spec: str) -> Corpus:
  """`spec` is "stdlib", a directory or a glob; raises UserError when it names no files."""
  if spec == STDLIB:
    root = sysconfig.get_paths()["stdlib"]
    files = _stdlib_files(root)
    slug = f"stdlib-py{sysconfig.get_python_version()}"
  elif glob.has_magic(spec):
    root = _glob_root(spec)
    files = glob.glob(spec, recursive=True)
    slug = os.path.basename(root.rstrip(os.sep)) or "glob"
  elif os.path.isdir(spec):
    root = spec
    files = [os.path.join(d, f) for d, dirs, fs in os.walk(spec) for f in fs
             if not f.startswith(".") and not _hidden(os.path.relpath(d, spec))]
    slug = os.path.basename(os.path.abspath(spec))
  elif os.path.isfile(spec):
    root, files, slug = os.path.dirname(spec), [spec], os.path.basename(spec)
  else:
    raise UserError(f"corpus {spec!r} does not exist; give 'stdlib', a directory or a glob")
  files = sorted(os.path.abspath(f) for f in files if os.path.isfile(f))
  if not files:
    raise UserError(f"corpus {spec!r} matches no files; check the path or glob")
  return Corpus(slug=_slugify(slug), root=os.path.abspath(root), files=tuple(files))


def _stdlib_files(root: str) -> list[str]:
  """The `*.py` files under `root` that `glob(root/**/*.py)` finds (no hidden names, symlinked
  folders followed) outside the excluded folders, which are never entered: site-packages
  holds most of a venv's files, and listing it cost ~3.5 s per opened dataset."""
  files = []
  for d, dirs, fs in os.walk(root, followlinks=True):
    dirs[:] = [x for x in dirs if not x.startswith(".") and x not in _STDLIB_EXCLUDE]
    files += [os.path.join(d, f) for f in fs if f.endswith(".py") and not f.startswith(".")]
  return files


def config_name(corpus: Corpus, val_fraction: float) -> str:
  """`<slug>-<fingerprint>`: the fingerprint covers relative paths, sizes and the split."""
  h = hashlib.sha256(f"{val_fraction!r}".encode())
  for f in corpus.files:
    h.update(f"\0{os.path.relpath(f, corpus.root)}\0{os.path.getsize(f)}".encode())
  return f"{corpus.slug}-{h.hexdigest()[:12]}"


def is_validation(relpath: str, content: bytes, val_fraction: float) -> bool:
  digest = hashlib.sha256(relpath.encode("utf-8") + b"\0" + content).digest()
  return int.from_bytes(digest[:8], "big") / 2.0**64 < val_fraction


class TextCorpusBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Plain-text files -> `train`/`validation` array_record splits of {text, path}."""

  name = NAME
  VERSION = tfds.core.Version(_VERSION)
  RELEASE_NOTES = {_VERSION: "Files as documents, split by a hash of (relpath, content)."}

  def __init__(self, *, corpus: Corpus, val_fraction: float = 0.05, **kwargs):
    self._corpus = corpus
    self._val_fraction = val_fraction
    config = tfds.core.BuilderConfig(name=config_name(corpus, val_fraction))
    super().__init__(config=config, file_format="array_record", **kwargs)


  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls):
    # TFDS looks next to a builder's source for a download-checksums file; a local corpus has
    # none, and the lookup lazily imports `importlib_resources`, which TFDS no longer requires.
    return None

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description=f"Plain-text files under {self._corpus.root}, one document per file.",
        features=tfds.features.FeaturesDict(
            {"text": tfds.features.Text(), "path": tfds.features.Text()}),
        metadata=tfds.core.MetadataDict(
            root=self._corpus.root, n_files=len(self._corpus.files),
            val_fraction=self._val_fraction))

  def _split_generators(self, dl_manager):
    del dl_manager  # Nothing to download: the corpus is on disk.
    return {"train": self._generate_examples(validation=False),
            "validation": self._generate_examples(validation=True)}

  def _generate_examples(self, validation: bool):
    for relpath, text, is_val in documents(self._corpus, self._val_fraction):
      if is_val == validation:
        yield relpath, {"text": text, "path": relpath}


def documents(corpus: Corpus, val_fraction: float):
  """(relpath, text, is_validation) for every non-empty UTF-8 file of the corpus."""
  for f in corpus.files:
    relpath = os.path.relpath(f, corpus.root)
    with open(f, "rb") as fh:
      content = fh.read()
    try:
      text = content.decode("utf-8")
    except UnicodeDecodeError:
      continue
    if text:
      yield relpath, text, is_validation(relpath, content, val_fraction)


class TooFewDocuments(UserError):
  """A corpus whose documents all fall in one split: TFDS cannot write the other."""

  def __init__(self, spec: str, n: int, val_fraction: float):
    super().__init__(f"corpus {spec!r} has {n} documents, too few to give both splits one at "
                     f"val_fraction={val_fraction}; add files or change it")
    self.spec, self.n, self.val_fraction = spec, n, val_fraction

  def __reduce__(self):  # pickled as it was made (a Ray worker's error reaches the driver)
    return TooFewDocuments, (self.spec, self.n, self.val_fraction)


def build(spec: str, data_dir: str, val_fraction: float = 0.05) -> str:
  """Prepares the corpus under `data_dir` once; returns its TFDS name `chinchax_text/<cfg>`.

  A dataset already prepared under `data_dir` is reused without reading the corpus files'
  contents (only their sizes, for the fingerprint).
  """
  if not 0.0 < val_fraction < 1.0:
    raise UserError(f"val_fraction={val_fraction} must be in (0, 1)")
  corpus = find_corpus(spec)
  builder = TextCorpusBuilder(corpus=corpus, val_fraction=val_fraction, data_dir=data_dir)
  if not builder.is_prepared():
    # TFDS cannot write an empty split: check both splits get documents before writing any.
    n_val = [v for _, _, v in documents(corpus, val_fraction)]
    if not n_val:
      raise UserError(f"corpus {spec!r} has no non-empty UTF-8 text files")
    if all(n_val) or not any(n_val):
      raise TooFewDocuments(spec, len(n_val), val_fraction)
    _prepare_quietly(builder)
  return f"{NAME}/{builder.builder_config.name}"


QUIET = False  # set by sweeps/console.py's quiet_libraries, unless `--verbose`


def _prepare_quietly(builder) -> None:
  """TFDS's bars and its 'Downloading and preparing dataset Unknown size' lines, unless
  `chinchax ... --verbose` (sweeps/console.py) asked for them: one line of ours instead."""
  if not QUIET:
    builder.download_and_prepare()
    return
  print(f"preparing the corpus once, under {builder.data_dir}", flush=True)
  tfds.disable_progress_bar()
  with contextlib.redirect_stdout(io.StringIO()):
    builder.download_and_prepare()


def _glob_root(pattern: str) -> str:
  parts = pattern.split(os.sep)
  i = next(i for i, p in enumerate(parts) if glob.has_magic(p))
  return os.sep.join(parts[:i]) or os.curdir


def _hidden(reldir: str) -> bool:
  return any(p.startswith(".") and p not in (".", "..") for p in reldir.split(os.sep))


def _slugify(s: str) -> str:
  return re.sub(r"[^a-z0-9.]+", "-", s.lower()).strip("-.") or "corpus"
