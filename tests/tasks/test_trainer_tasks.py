"""Tasks in the trainer: the JSONL items and their rows (hand-written expected tokens), the
scoring against a float64 numpy forward pass (tests/models/test_decoder.py's), accuracy and
bits per byte on a bigram model whose answers and log-likelihoods are known in closed form,
sharded against one device (a subprocess of 8 CPU devices), and a tiny train with the built-in
task whose workdir `chinchax fit-tasks` reads."""

import json
import math
import os
import subprocess
import sys

import flax.linen as nn
import jax
import numpy as np
import optax
import pytest

from chinchax.cli import eval as cli_eval
from chinchax.errors import UserError
from chinchax.models import decoder, sharding, sharding as mesh_lib
from chinchax.models.config import ModelConfig
from chinchax.scaling.runs.conventions import Shape
from chinchax.scaling.tasks import steps, table
from chinchax.sweeps.data import choices, tokenizers
from chinchax.sweeps.train import step as step_lib
from chinchax.sweeps.train import tasks
from tests.models.test_decoder import _reference_logits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BYTES = tokenizers.BytesTokenizer()
OPT = optax.adamw(1e-3)


def _task(tmp_path, items, name="t") -> choices.Task:
  path = tmp_path / f"{name}.jsonl"
  path.write_text("".join(json.dumps(it) + "\n" for it in items))
  return choices.read(str(path))


def test_rows_put_each_choice_under_its_targets(tmp_path):
  t = _task(tmp_path, [{"context": "ab", "choices": ["cd", "e"], "answer": 0},
                       {"context": "", "choices": ["xyz", "w"], "answer": 1}])
  rows = choices.encode(t, BYTES, seq_len=4)
  P, E, I = BYTES.pad_id, BYTES.eod_id, -1
  o = lambda s: [ord(ch) for ch in s]
  # item 0: "ab" + "cd"; "ab" + "e"; item 1 (empty context: an EOD) + "xyz"; EOD + "w"
  want_in = [o("abc") + [P], o("ab") + [P, P], [E] + o("xy") + [P], [E, P, P, P]]
  want_tg = [[I] + o("cd") + [I], [I] + o("e") + [I, I], o("xyz") + [I], o("w") + [I, I, I]]
  assert rows.inputs.tolist() == want_in
  assert rows.targets.tolist() == want_tg
  assert rows.item.tolist() == [0, 0, 1, 1] and rows.n_bytes.tolist() == [2, 1, 3, 1]
  assert t.chance == 0.5 and t.answers.tolist() == [0, 1]
  # Stacked for batches of 3: two padding rows that count nothing.
  p = tasks.stack((rows,), batch=3, pad_id=P)
  assert p.inputs.tolist() == want_in + [[P] * 4] * 2
  assert p.targets.tolist() == want_tg + [[I] * 4] * 2


def test_a_long_context_gives_way_and_a_long_choice_is_refused(tmp_path):
  t = _task(tmp_path, [{"context": "0123456789", "choices": ["abc", "d"], "answer": 0}])
  rows = choices.encode(t, BYTES, seq_len=5)
  assert rows.inputs[0].tolist() == [ord(c) for c in "789ab"]  # 6 tokens kept: 3 + 3
  assert rows.targets[0].tolist() == [-1, -1] + [ord(c) for c in "abc"]
  with pytest.raises(UserError, match=r"item 1's choice 0 is 3 tokens, more than the "
                                      r"model's seq_len 2"):
    choices.encode(t, BYTES, seq_len=2)


@pytest.mark.parametrize("line, match", [
    ('{"context": "a", "choices": ["b", "c"]}', r":3: no answer"),
    ('{"context": "a", "choices": ["b", "c"], "answer": 2}', r"answer 2 is outside the 2"),
    ('{"context": "a", "choices": ["b", "c"], "answer": -1}', r"answer -1 is outside"),
    ('{"context": "a", "choices": ["b", "c"], "answer": true}', r"answer must be the index"),
    ('{"context": "a", "choices": [], "answer": 0}', r"choices is empty"),
    ('{"context": "a", "choices": ["b"], "answer": 0}', r"one choice leaves nothing"),
    ('{"context": "a", "choices": ["b", ""], "answer": 0}', r"choice 1 is empty"),
    ('{"context": 3, "choices": ["b", "c"], "answer": 0}', r"context must be a string"),
    ('{"choices": ["b", "c"], "answer": 0}', r"no context"),
    ('["a", ["b"], 0]', r"expected a JSON object"),
    ('{context: a}', r"not valid JSON"),
])
def test_a_bad_item_is_one_line_naming_file_and_line(tmp_path, line, match):
  path = tmp_path / "bad.jsonl"
  path.write_text('{"context": "x", "choices": ["y", "z"], "answer": 1}\n\n' + line + "\n")
  with pytest.raises(UserError, match=match) as e:
    choices.read_all((str(path),))
  assert "\n" not in str(e.value) and "bad.jsonl:3:" in str(e.value)


def test_two_tasks_of_one_name_and_an_empty_file_are_refused(tmp_path):
  (tmp_path / "a").mkdir()
  good = '{"context": "x", "choices": ["y", "z"], "answer": 1}\n'
  (tmp_path / "t.jsonl").write_text(good)
  (tmp_path / "a" / "t.jsonl").write_text(good)
  with pytest.raises(UserError, match=r"names t twice"):
    choices.read_all((str(tmp_path / "t.jsonl"), str(tmp_path / "a" / "t.jsonl")))
  (tmp_path / "e.jsonl").write_text("\n")
  with pytest.raises(UserError, match=r"e\.jsonl: no items"):
    choices.read_all((str(tmp_path / "e.jsonl"),))


def _one_device():
  return mesh_lib.make_mesh((1, 1, 1), devices=jax.devices()[:1])


def _score(cfg, params, rows, batch=4):
  """Scored by the run's eval step, as the trainer does."""
  mesh = _one_device()
  step = step_lib.make_eval_step(cfg, OPT, mesh, sharding.RULES, "fsdp")
  prepared = tasks.stack((rows,), batch, BYTES.pad_id)
  return tasks.log_likelihoods(step, params, prepared,
                               sharding.batch_sharding(mesh, sharding.RULES))[0]


def test_log_likelihoods_match_a_float64_forward_pass(tmp_path):
  cfg = ModelConfig(Shape(d_model=32, n_layers=2, n_heads=2, d_ff=64, vocab_size=258,
                          seq_len=12), compute_dtype="float32")
  items = [{"context": "def f(x):\n  return x + 1\n", "choices": ["pass", "x", "return y"],
            "answer": 2},
           {"context": "", "choices": ["import os", "ok"], "answer": 0},
           {"context": "a = [", "choices": ["1, 2]", "]"], "answer": 1}]
  t = _task(tmp_path, items)
  rows = choices.encode(t, BYTES, cfg.shape.seq_len)
  params = jax.device_get(step_lib.init_train_state(cfg, OPT, _one_device(),
                                                    jax.random.key(3))["params"])
  got = _score(cfg, params, rows)
  want, correct_nats, correct_bytes, right = [], 0.0, 0, 0
  for it in items:
    per_byte = []
    for j, ch in enumerate(it["choices"]):
      ctx = list(it["context"].encode()) or [256]
      cont = list(ch.encode())
      seq = np.array((ctx + cont)[-(cfg.shape.seq_len + 1):])
      logits = _reference_logits(params, seq[None, :-1], cfg.shape, cfg.rope_base)[0]
      logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                                                              keepdims=True)) \
          - logits.max(-1, keepdims=True)
      ll = sum(logp[len(seq) - 1 - len(cont) + k, cont[k]] for k in range(len(cont)))
      want.append(ll)
      per_byte.append(ll / len(cont))
      if j == it["answer"]:
        correct_nats, correct_bytes = correct_nats - ll, correct_bytes + len(cont)
    right += int(np.argmax(per_byte) == it["answer"])
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
  loss, accuracy = tasks.summary(rows, got)
  assert loss == pytest.approx(correct_nats / (math.log(2) * correct_bytes), rel=1e-5)
  assert accuracy == right / len(items)


def test_scoring_is_the_eval_step_compiled_once_at_any_evaluation_point(tmp_path):
  cfg = ModelConfig(Shape(d_model=24, n_layers=1, n_heads=2, d_ff=40, vocab_size=258,
                          seq_len=10), compute_dtype="float32")
  mesh = _one_device()
  bs = sharding.batch_sharding(mesh, sharding.RULES)
  step = step_lib.make_eval_step(cfg, OPT, mesh, sharding.RULES, "fsdp")
  params = step_lib.init_train_state(cfg, OPT, mesh, jax.random.key(5))["params"]
  # An eval batch of the stream (every target counted): the loss of decoder.loss_fn.
  rng = np.random.default_rng(0)
  window = rng.integers(0, 256, (3, 11)).astype(np.int32)
  batch = {"inputs": window[:, :-1], "targets": window[:, 1:]}
  m = step(params, {k: jax.device_put(v, bs) for k, v in batch.items()})
  _, want = decoder.loss_fn(cfg, jax.device_get(params), batch)
  assert float(m["tokens"]) == 30
  assert float(m["loss_sum"]) == pytest.approx(float(want["loss"]) * 30, rel=1e-6)
  assert float(m["row_loss_sums"].sum()) == pytest.approx(float(m["loss_sum"]), rel=1e-6)

  later = jax.tree.map(lambda x: x * 0.5, params)  # another evaluation point
  compiles, on = [], [True]  # jax keeps a listener for the process: it stops counting below
  jax.monitoring.register_event_duration_secs_listener(
      lambda name, secs, **kw: compiles.append(kw.get("fun_name"))
      if on[0] and name == "/jax/core/compile/backend_compile_duration" else None)
  items = [{"context": "x = 1\n", "choices": ["y = 2", "pass", "x"], "answer": 0},
           {"context": "", "choices": ["import os", "ok"], "answer": 1}]
  a = choices.encode(_task(tmp_path, items, "a"), BYTES, cfg.shape.seq_len)
  b = choices.encode(_task(tmp_path, items[::-1], "b"), BYTES, cfg.shape.seq_len)
  prepared = tasks.stack((a, b), 3, BYTES.pad_id)  # 10 rows: 4 batches, one across the tasks
  first = tasks.log_likelihoods(step, params, prepared, bs)
  second = tasks.log_likelihoods(step, later, prepared, bs)
  on[0] = False
  assert compiles == []  # both tasks, both points: the eval step already compiled
  assert [len(x) for x in first] == [5, 5] and not np.allclose(first[0], second[0])
  np.testing.assert_allclose(first[1], first[0][[3, 4, 0, 1, 2]], rtol=1e-6)  # same rows


def _bigram(cfg):
  """Parameters whose model is a bigram a -> b -> c -> d -> a: the blocks write nothing to
  the residual stream, the embedding of letter k is e_k, and W_out gives its successor 2."""
  p = jax.device_get(step_lib.init_train_state(cfg, OPT, _one_device(),
                                               jax.random.key(0))["params"])
  p = jax.tree.map(np.array, p)
  p["layers"]["attn"]["w_o"][:] = 0
  p["layers"]["mlp"]["w_down"][:] = 0
  p["embed"]["embedding"][:] = 0
  p["w_out"][:] = 0
  for k, ch in enumerate("abcd"):
    p["embed"]["embedding"][ord(ch), k] = 1.0
    p["w_out"][k, ord("abcd"[(k + 1) % 4])] = 2.0
  return p


def test_accuracy_is_length_normalised_on_a_bigram_model_with_known_answers(tmp_path):
  cfg = ModelConfig(Shape(d_model=64, n_layers=1, n_heads=2, d_ff=32, vocab_size=258,
                          seq_len=16), compute_dtype="float32")
  items = [{"context": "ab", "choices": ["cd", "dc", "aa", "bd"], "answer": 0},
           # raw likelihood prefers "a" (one wrong step); per byte the long chain wins
           {"context": "ab", "choices": ["a", "cdabcdabaa"], "answer": 1},
           {"context": "cd", "choices": ["b", "c", "a", "d"], "answer": 2},
           {"context": "a", "choices": ["b", "c"], "answer": 1}]  # the model picks "b": wrong
  t = _task(tmp_path, items)
  rows = choices.encode(t, BYTES, cfg.shape.seq_len)
  got = _score(cfg, _bigram(cfg), rows)
  # After letter k the RMS-normed stream is e_k / sqrt(1/64 + eps): its successor's logit is
  # 2 / sqrt(1/64 + 1e-6), every other of the 258 logits 0.
  hi = 2.0 / math.sqrt(1 / 64 + 1e-6)
  log_z = math.log(math.exp(hi) + 257)
  on, off = hi - log_z, -log_z
  correct = [2 * on, 8 * on + 2 * off, on, off]
  assert got[0] == pytest.approx(correct[0], abs=1e-4)
  assert got[4] == pytest.approx(off, abs=1e-4)          # "a" after "ab"
  assert got[5] == pytest.approx(correct[1], abs=1e-3)
  assert got[4] > got[5]                                  # un-normalised, "a" would win
  loss, accuracy = tasks.summary(rows, got)
  assert accuracy == 0.75
  assert loss == pytest.approx(-sum(correct) / (math.log(2) * 14), rel=1e-5)


@pytest.mark.slow
def test_sharded_scores_equal_one_device():
  env = {**os.environ, "PYTHONPATH": ROOT}
  env.pop("XLA_FLAGS", None)
  proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "helpers",
                                                      "task_shard_check.py")],
                        env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert out["rows"] == 192 and len(out["meshes"]) == 4
  for mesh, m in out["meshes"].items():
    assert m["max_abs"] < 1e-3, mesh  # sums of up to 24 float32 log-probs of about -5.5
    assert m["summary"][0] == pytest.approx(out["summary_1"][0], rel=1e-5), mesh
    assert m["summary"][1] == out["summary_1"][1], mesh


def _record(name, N, evals, sha="s"):
  return {"schema": "chinchax/run/v1", "name": name, "status": "done", "N_total": N,
          "tasks": {"next": {"loss_unit": "bpb", "chance": 0.25, "sha256": sha,
                             "evals": [{"tokens": D, "loss": L, "accuracy": A}
                                       for D, L, A in evals]}}}


def test_a_workdir_reads_into_one_row_per_evaluation(tmp_path):
  recs = [_record(f"r{i}", 1e4 * (i + 1), [(1e5 * (i + 1), 3.0 - 0.1 * i, 0.3),
                                           (2e5 * (i + 1), 2.9 - 0.1 * i, 0.35)])
          for i in range(5)]
  recs.append({"schema": "chinchax/run/v1", "name": "failed", "status": "failed"})
  (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
  data, _ = table.load(str(tmp_path))
  d = data["next"]
  assert d.runs == ("r0", "r1", "r2", "r3", "r4") and d.chance == 0.25
  assert d.N.tolist() == [1e4, 1e4, 2e4, 2e4, 3e4, 3e4, 4e4, 4e4, 5e4, 5e4]
  assert d.D[:4].tolist() == [1e5, 2e5, 2e5, 4e5]
  assert d.loss[:3].tolist() == [3.0, 2.9, 2.9] and d.accuracy[:2].tolist() == [0.3, 0.35]
  recs[2] = _record("r2", 3e4, [(1e5, 3.0, 0.3)], sha="other")
  (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
  with pytest.raises(UserError, match=r"runs\.jsonl:3: run 'r2' scored task 'next' from "
                                      r"another file than run 'r0'"):
    table.load(str(tmp_path))


@pytest.mark.slow
def test_a_tiny_train_scores_the_builtin_task_and_fit_tasks_reads_its_workdir(tmp_path):
  run = tmp_path / "wd" / "run0"
  cli = [sys.executable, "-m", "chinchax.cli"]
  # Counted by bench/programs.py (jax's compile events): the task is scored by the eval step,
  # compiled once for the run's three evaluations, and no program of its own.
  proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "programs.py"), "--json",
                         "--cold", "--", "train", "--config=sweeps/configs/train.py:tiny",
                         f"--workdir={run}", "--config.tasks=('stdlib_next_line',)"],
                        cwd=ROOT, capture_output=True, text=True, timeout=600,
                        env={**os.environ, "PYTHONPATH": ROOT})
  assert proc.returncode == 0, proc.stderr[-2000:]
  programs = json.loads(proc.stdout.strip().splitlines()[-1])
  steps = {n: programs["by_name"][n][:2] for n in ("jit(train_chunk)", "jit(eval_step)")}
  assert steps == {"jit(train_chunk)": [1, 1], "jit(eval_step)": [1, 1]}, programs["by_name"]
  assert not [n for n in programs["by_name"] if "score" in n], programs["by_name"]
  rows = [json.loads(l) for l in open(run / "metrics.jsonl")]
  scored = [r for r in rows if "tasks" in r]
  assert [r["step"] for r in scored] == [8, 16, 24]  # eval_every 8, and the final eval
  assert [r["tokens"] for r in scored] == [8 * 32 * 8, 8 * 32 * 16, 8 * 32 * 24]
  for r in scored:
    v = r["tasks"]["stdlib_next_line"]
    assert 0 < v["loss"] < 9 and round(v["accuracy"] * 48) == pytest.approx(v["accuracy"] * 48)
  # the bytes' uniform guess is log2(258) = 8.01 bits; training moves the task's loss down
  assert scored[-1]["tasks"]["stdlib_next_line"]["loss"] < scored[0]["tasks"][
      "stdlib_next_line"]["loss"]
  rec = json.load(open(run / "result.json"))
  t = rec["tasks"]["stdlib_next_line"]
  assert t["items"] == 48 and t["chance"] == 0.25 and t["loss_unit"] == "bpb"
  # `chinchax eval` scores the run's tasks at its last checkpoint as the run did at its end.
  assert cli_eval.main(["--workdir", str(run), "--steps=last", "--quiet"]) == 0
  probed = [json.loads(l) for l in open(run / "eval_probe.jsonl")]
  (task_row,) = [r for r in probed if "task" in r]
  end = scored[-1]["tasks"]["stdlib_next_line"]
  assert (task_row["step"], task_row["task"], task_row["items"]) == (24, "stdlib_next_line", 48)
  assert task_row["loss"] == pytest.approx(end["loss"], rel=1e-6)
  assert task_row["accuracy"] == end["accuracy"]
  assert [(e["step"], e["loss"], e["accuracy"]) for e in t["evals"]] == [
      (r["step"], r["tasks"]["stdlib_next_line"]["loss"],
       r["tasks"]["stdlib_next_line"]["accuracy"]) for r in scored]
  # Four more runs stand in for a sweep's other sizes and token counts (fit-tasks needs five).
  lines = [rec]
  for i, d in zip(range(1, 5), (3.0, 0.5, 6.0, 1.5)):
    other = json.loads(json.dumps(rec))
    other["name"], other["N_total"] = f"run{i}", rec["N_total"] * 2**i
    for e in other["tasks"]["stdlib_next_line"]["evals"]:
      e["loss"], e["tokens"] = e["loss"] * 0.9**i * d**-0.05, e["tokens"] * d
    lines.append(other)
  (tmp_path / "wd" / "runs.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
  out = tmp_path / "tasks.json"
  proc = subprocess.run(cli + ["fit-tasks", str(tmp_path / "wd"), f"--out={out}",
                               "--bootstrap=20", "--quiet"],
                        cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  doc = json.load(open(out))
  e = doc["tasks"]["stdlib_next_line"]
  assert e["step1"]["runs"] == 5 and e["step2"]["evaluations"] == 15
  assert e["step2"]["floor"] == 0.25 and e["step2"]["floor_fixed"]
  assert doc["conventions"]["loss"].startswith("bits per byte")


# The tiny sweep's evaluations of the built-in task (tiny.py:tasks): accuracies near chance,
# on which a bootstrap resample's Levenberg-Marquardt system was singular (a LinAlgError).
NEAR_CHANCE = [  # run, N, D, loss (bpb), accuracy
    (0, 31968, 307200, 2.9797, 8 / 48), (0, 31968, 614400, 2.4732, 12 / 48),
    (0, 31968, 921600, 2.3239, 12 / 48), (0, 31968, 1228800, 2.2704, 13 / 48),
    (0, 31968, 1304064, 2.2175, 12 / 48), (1, 46360, 307200, 2.8247, 11 / 48),
    (1, 46360, 614400, 2.4643, 12 / 48), (1, 46360, 898560, 2.3581, 13 / 48),
    (2, 65616, 307200, 2.7933, 10 / 48), (2, 65616, 614400, 2.4232, 11 / 48),
    (2, 65616, 634368, 2.4229, 11 / 48), (3, 46360, 396800, 2.8694, 9 / 48),
    (3, 46360, 793600, 2.3754, 10 / 48), (3, 46360, 1190400, 2.1884, 13 / 48),
    (3, 46360, 1587200, 2.0911, 14 / 48), (3, 46360, 1797504, 2.0814, 14 / 48),
    (4, 65616, 396800, 2.6435, 11 / 48), (4, 65616, 793600, 2.2317, 14 / 48),
    (4, 65616, 1190400, 2.1392, 14 / 48), (4, 65616, 1269760, 2.1022, 14 / 48),
    (5, 90888, 396800, 2.645, 11 / 48), (5, 90888, 793600, 2.2407, 12 / 48),
    (5, 90888, 916608, 2.2086, 14 / 48)]


def test_the_bootstrap_survives_accuracies_near_chance():
  cols = list(zip(*NEAR_CHANCE))
  d = table.from_columns({"run": [f"r{i}" for i in cols[0]], "N": cols[1], "D": cols[2],
                          "task": ["t"] * len(NEAR_CHANCE), "loss": cols[3],
                          "accuracy": cols[4], "chance": [0.25] * len(NEAR_CHANCE)})["t"]
  f = steps.fit_task(d, bootstrap=200, seed=0)
  floor, ceiling = f.step2.params[:2]
  assert floor == 0.25 and 0.25 < ceiling <= 1
  assert len(f.draws) > 100
