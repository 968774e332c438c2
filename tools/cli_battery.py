"""A careless-user and hostile-input battery of the ``depthscale`` command line.

    python tools/cli_battery.py [--only TEXT] > battery.jsonl

Each case lays files in a fresh folder (a spec, a user module, a finished store, a decided
reproduce folder), runs one command in a subprocess with this checkout's ``src`` first on the
path, and says what must hold: a refusal (exit 2, within LATE seconds, nothing new written), a
success, "refuse or warn" (a refusal, or exit 0 with a named word in the output), or "skip"
(reproduce judged nothing: exit 1 with the reason). Every case
also checks that no file laid before changed or vanished, that no traceback was printed and
that the command ended within the time cap. One JSON line per case (its findings, or ``ok``),
then a count. Cases that exit 0 on purpose take their tags from the expectation, so a finding
here is a place to look, not a verdict: "lost" on a reproduce folder whose claim was judged
again may be a rewritten record with the same verdict.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY, SRC = sys.executable, str(ROOT / "src")
CAP = 150
LATE = 25.0

SPEC = """[study]
name = "tiny"
model = "resnet1"
dataset = "teacher"
recipe = "depth-mup"
[train]
steps = 1
batch_size = 8
loss = "mse"
{train_extra}
[grid]
depth = {depth}
width = {width}
lr = {lr}
seed = [0]
"""


def spec(depth: str = "[1, 2]", width: str = "[4]", lr: str = "[0.1]",
         train_extra: str = "") -> str:
    return SPEC.format(depth=depth, width=width, lr=lr, train_extra=train_extra)


# (name, files {relpath: text}, argv ({d}: the case's folder), expect ('refuse', 'ok',
# 'refuse-or-warn' or 'any'), protected relpaths (None: every file laid), a word the output
# must hold (or None), what to build first ('store', 'store+csv', 'claims-json' or None))
CASES: list[tuple[Any, ...]] = []


def case(name: str, argv: list[str], expect: str = "refuse", files: dict[str, str] | None = None,
         protect: list[str] | None = None, needle: str | None = None,
         prebuild: str | None = None) -> None:
    CASES.append((name, files or {}, argv, expect, protect, needle, prebuild))


# --- sweep specs (items 3, 7)
for nm, kw in {
    "spec-depth-150000": dict(depth="[150000]"),
    "spec-width-60000": dict(width="[60000]"),
    "spec-epochs-1e9": dict(train_extra="epochs = 1e9"),
    "spec-momentum-1": dict(train_extra="momentum = 1.0"),
    "spec-momentum-adam": dict(train_extra='optimizer = "adam"\nmomentum = 0.9'),
    "spec-wd-1e308": dict(train_extra="weight_decay = 1e308"),
    "spec-lr-1e300": dict(lr="[1e300]"),
    "spec-lr-nan": dict(lr="[nan]"),
    "spec-lr-zero": dict(lr="[0.0]"),
    "spec-width-zero": dict(width="[0]"),
    "spec-depth-neg": dict(depth="[-1]"),
    "spec-width-float": dict(width="[4.5]"),
    "spec-batch-0": dict(train_extra="batch_size = 0"),
}.items():
    text = spec(**kw)
    if "batch_size = 0" in text:
        text = text.replace("batch_size = 8\n", "")
    if "epochs" in text:
        text = text.replace("steps = 1\n", "")
    case(nm, ["sweep", "{d}/spec.toml", "--out", "{d}/out"], files={"spec.toml": text})

# a grid value only some runs cannot use: heads that do not divide some widths of a ViT
case("spec-partial-grid", ["sweep", "{d}/spec.toml", "--out", "{d}/out"],
     files={"spec.toml": spec(width="[4, 6]").replace('model = "resnet1"', 'model = "vit"')
            .replace('dataset = "teacher"', 'dataset = "mnist1d"').replace('"mse"', '"ce"')
            + "\n[model]\nheads = 4\n"})

# --- status exports over owned files (item 1)
for target in ("results.sqlite", "study.toml", "spec.toml"):
    for flag in ("--csv", "--parquet"):
        case(f"status{flag}-over-{target}", ["status", "{d}/store", flag, "{d}/store/" + target],
             prebuild="store")
case("status-csv-over-user-file", ["status", "{d}/store", "--csv", "{d}/notes.txt"],
     files={"notes.txt": "my notes\n"}, prebuild="store")
case("status-csv-twice", ["status", "{d}/store", "--csv", "{d}/runs.csv"], expect="ok",
     prebuild="store+csv", protect=[])
case("bench-json-over-user-file", ["bench", "no-such-bench", "--json", "{d}/notes.txt"],
     files={"notes.txt": "my notes\n"})
case("train-out-is-file", ["train", "--width", "4", "--depth", "1", "--steps", "1", "--out",
                           "{d}/notes.txt"], files={"notes.txt": "x\n"})

# --- user modules (item 5)
case("model-sysexit-import-explain", ["explain", "--model", "exitmod:make", "--width", "4",
                                      "--depth", "1"],
     files={"exitmod.py": "import sys\nsys.exit(0)\n"}, needle="exit")
case("model-sysexit-import-train", ["train", "--model", "exitmod:make", "--width", "4",
                                    "--depth", "1", "--steps", "1", "--out", "{d}/out"],
     files={"exitmod.py": "import sys\nsys.exit(3)\n"})
case("model-raise-import-coord", ["coord-check", "--model", "raisemod:make", "--widths", "4,8",
                                  "--depths", "1,2", "--steps", "1", "--seeds", "1"],
     files={"raisemod.py": "raise ValueError('boom')\n"})

FROZEN = """import torch.nn as nn
def make(input_shape, n_out, width, depth, **kw):
    m = nn.Sequential(nn.Flatten(), nn.Linear(input_shape[-1], width), nn.ReLU(),
                      nn.Linear(width, n_out))
    for p in m.parameters():
        p.requires_grad_(False)
    return m
"""
DETACHED = """import torch.nn as nn
class M(nn.Module):
    def __init__(self, d, w, o):
        super().__init__(); self.a = nn.Linear(d, w); self.b = nn.Linear(w, o)
    def forward(self, x):
        return self.b(self.a(x.flatten(1)).relu()).detach()
def make(input_shape, n_out, width, depth, **kw):
    return M(input_shape[-1], width, n_out)
"""
INTSCORES = """import torch.nn as nn
class M(nn.Module):
    def __init__(self, d, w, o):
        super().__init__(); self.a = nn.Linear(d, w); self.b = nn.Linear(w, o)
    def forward(self, x):
        return self.b(self.a(x.flatten(1)).relu()).round().long()
def make(input_shape, n_out, width, depth, **kw):
    return M(input_shape[-1], width, n_out)
"""
INPLACE = """import torch.nn as nn
class M(nn.Module):
    def __init__(self, d, w, o):
        super().__init__(); self.a = nn.Linear(d, w); self.b = nn.Linear(w, o)
    def forward(self, x):
        h = self.a(x.flatten(1)).sigmoid()
        if self.training:
            h.mul_(2.0)
        return self.b(h)
def make(input_shape, n_out, width, depth, **kw):
    return M(input_shape[-1], width, n_out)
"""
for nm, src in {"frozen": FROZEN, "detached": DETACHED, "intscores": INTSCORES,
                "inplace": INPLACE}.items():
    case(f"model-{nm}-train", ["train", "--model", f"{nm}:make", "--width", "4", "--depth", "1",
                               "--steps", "2", "--dataset", "teacher", "--loss", "mse",
                               "--out", "{d}/out"], files={f"{nm}.py": src})
    case(f"model-{nm}-sweep", ["sweep", "{d}/spec.toml", "--out", "{d}/out"],
         files={f"{nm}.py": src, "spec.toml": spec().replace('"resnet1"', f'"{nm}:make"')})

# --- reproduce --set (items 3, 4)
for nm, sets in {
    "set-nan": ["seeds=NaN"], "set-inf": ["seeds=Infinity"], "set-float-int": ["seeds=32.0"],
    "set-zero-seeds": ["seeds=0"], "set-neg": ["seeds=-1"], "set-unknown": ["nope=1"],
    "set-batch-0": ["epochs=0"], "set-huge": ["width=4096", "grid_depths=[1000]"],
    "set-string-for-int": ["seeds=\"a\""],
}.items():
    argv = ["reproduce", "nfd-fig2", "--out", "{d}/rep"]
    for s in sets:
        argv += ["--set", s]
    case(nm, argv)

# --- reproduce --from-stored must not replace a verdict (item 2)
# a claim with no stored runs is judged again from its stored computations: its record is
# rewritten (same verdict), so only the store's absence of training is checked here
case("from-stored-missing", ["reproduce", "chizat-thm2", "--from-stored", "--out", "{d}/rep"],
     prebuild="claims-json", protect=[], expect="ok")

# --- ignored or conflicting flags (item 8)
case("train-momentum-adam", ["train", "--width", "4", "--depth", "1", "--steps", "1",
                             "--optimizer", "adam", "--momentum", "0.9", "--out", "{d}/out"],
     expect="refuse-or-warn", needle="momentum")
case("train-steps-and-epochs", ["train", "--width", "4", "--depth", "1", "--steps", "1",
                                "--epochs", "3", "--out", "{d}/out"], expect="refuse-or-warn",
     needle="epochs")
case("train-wd-1e308", ["train", "--width", "4", "--depth", "1", "--steps", "1",
                        "--weight-decay", "1e308", "--out", "{d}/out"])
case("tc-lrs-1e300", ["transfer-check", "--lrs", "1e300,1e301,1e302", "--depths", "1,2",
                      "--seeds", "1", "--steps", "1", "--width", "4"])
case("sweep-batch-lrs-adam", ["sweep", "{d}/spec.toml", "--out", "{d}/out", "--batch-lrs"],
     files={"spec.toml": spec(lr="[0.01, 0.1]", train_extra='optimizer = "adam"')},
     expect="refuse-or-warn", needle="batch")
case("sweep-workers-0", ["sweep", "{d}/spec.toml", "--out", "{d}/out", "--workers", "0"],
     files={"spec.toml": spec()})
case("sweep-address-local", ["sweep", "{d}/spec.toml", "--out", "{d}/out", "--address",
                             "1.2.3.4:1"], files={"spec.toml": spec()}, expect="refuse-or-warn",
     needle="address")
case("limit-kernel-particles", ["limit", "kernel", "--particles", "64", "--inputs", "2",
                                "--dim", "2"], expect="refuse-or-warn", needle="particles")
case("limit-huge-particles", ["limit", "sde", "--particles", "1000000000", "--inputs", "2",
                              "--dim", "2", "--depth-steps", "4"])
case("limit-huge-steps", ["limit", "nfd", "--steps", "1000000000", "--particles", "16",
                          "--depth-steps", "4"])
case("fit-empty-dir", ["fit", "{d}/empty"], files={"empty/.keep": ""})
case("fit-group-unknown", ["fit", "{d}/store", "--group", "nope"], prebuild="store")
case("reproduce-from-stored-empty", ["reproduce", "nfd-fig2", "--from-stored", "--out",
                                     "{d}/nothing"], expect="skip", needle="not judged")
case("reproduce-seeds-0", ["reproduce", "nfd-fig2", "--seeds", "0", "--out", "{d}/rep"])
case("reproduce-budget-0", ["reproduce", "nfd-fig2", "--budget", "0s", "--out", "{d}/rep"])
case("reproduce-control-from-stored-none", ["reproduce", "chizat-thm2", "--control",
                                            "--from-stored", "--out", "{d}/rep2"], expect="ok")
case("coord-check-one-width", ["coord-check", "--widths", "4", "--depths", "1", "--steps", "1",
                               "--seeds", "1"])
case("tc-two-lrs", ["transfer-check", "--lrs", "0.1,1", "--depths", "1,2", "--seeds", "1",
                    "--steps", "1", "--width", "4"])
case("train-epochs-1e9", ["train", "--width", "4", "--depth", "1", "--epochs", "1e9",
                          "--out", "{d}/out"])
case("train-batch-huge", ["train", "--width", "4", "--depth", "1", "--steps", "1",
                          "--batch-size", "100000000", "--out", "{d}/out"],
     expect="refuse-or-warn", needle="batch-size")
case("transfer-to-depth-0", ["transfer", "--rule", "depth-mup", "--lr", "0.1", "--from-depth",
                             "2", "--to-depth", "0"])
case("transfer-lr-1e308", ["transfer", "--rule", "laws", "--lr", "1e308", "--from-depth", "2",
                           "--to-depth", "1000000"], expect="ok")  # a finite, small prediction


def digest(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in root.rglob("*"):
        if p.is_file() and not p.name.endswith(("-wal", "-shm")):
            out[str(p.relative_to(root))] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def run(argv: list[str], cwd: Path) -> tuple[int | None, str, float]:
    env = dict(os.environ, PYTHONPATH=SRC, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    t = time.monotonic()
    try:
        p = subprocess.run([PY, "-m", "depthscale", *argv], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=CAP, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout + p.stderr, time.monotonic() - t
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        return None, out.decode() if isinstance(out, bytes) else str(out), time.monotonic() - t


def prebuild(kind: str, d: Path) -> None:
    if kind.startswith("store"):
        (d / "s.toml").write_text(spec())
        code, out, _ = run(["sweep", str(d / "s.toml"), "--out", str(d / "store")], d)
        assert code == 0, out
        if kind.endswith("+csv"):
            code, out, _ = run(["status", str(d / "store"), "--csv", str(d / "runs.csv")], d)
            assert code == 0, out
    elif kind == "claims-json":
        code, out, _ = run(["reproduce", "chizat-thm2", "--scale", "quick", "--out",
                            str(d / "rep")], d)
        assert code in (0, 1), out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, help="run the cases whose name holds this text")
    only = p.parse_args().only
    results = [_case(c) for c in CASES if only is None or only in c[0]]
    bad = [r for r in results if r["tags"] != ["ok"]]
    print(f"# {len(results)} cases, {len(bad)} with findings", flush=True)
    return 0


def _case(c: tuple[Any, ...]) -> dict[str, Any]:
    name, files, argv, expect, protect, needle, pre = c
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        if pre:
            prebuild(pre, d)
        before = digest(d)
        args = [a.replace("{d}", str(d)) for a in argv]
        code, out, secs = run(args, d)
        after = digest(d)
        keys = before if protect is None else {k: before[k] for k in protect if k in before}
        lost = [k for k in keys if after.get(k) != before[k]]
        new = sorted(set(after) - set(before))
        tags: list[str] = []
        if code is None:
            tags.append("hang")
        if "Traceback" in out:
            tags.append("traceback")
        if lost:
            tags.append("lost:" + ",".join(lost))
        if expect == "refuse":
            if code == 0:
                tags.append("silent")
            elif code not in (2, None):
                tags.append(f"unexpected:{code}")
            if code == 2 and secs > LATE:
                tags.append(f"late:{secs:.0f}s")
            if code == 2 and [n for n in new if not n.startswith(".")]:
                tags.append("wrote-on-refusal:" + ",".join(new[:3]))
        elif expect == "ok":
            if code != 0:
                tags.append(f"unexpected:{code}")
        elif expect == "skip":  # judged nothing: exit 1 naming why, the folder's record kept
            if code != 1 or (needle is not None and needle not in out):
                tags.append(f"unexpected:{code}")
        elif expect == "refuse-or-warn":
            if code == 0 and (needle is None or needle.lower() not in out.lower()):
                tags.append("silent(no warning)")
            elif code not in (0, 2, None):
                tags.append(f"unexpected:{code}")
        if needle and code == 2 and needle.lower() not in out.lower():
            tags.append(f"message lacks {needle!r}")
        last = [ln for ln in out.strip().splitlines() if ln.strip()][-1:] or [""]
        result = {"name": name, "code": code, "secs": round(secs, 1), "tags": tags or ["ok"],
                  "last": last[0][:220]}
        print(json.dumps(result), flush=True)
        return result


if __name__ == "__main__":
    raise SystemExit(main())
