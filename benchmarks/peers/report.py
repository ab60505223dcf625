"""The peers table: rows, markdown, the section written into docs/benchmarks.md, JSON lines."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

BEGIN = "<!-- peers:begin (written by benchmarks/peers/run.py; edits inside are replaced) -->"
END = "<!-- peers:end -->"
MIB = 1 << 20


@dataclass
class Row:
    decoder: str
    device: str
    graph: str
    batch: str  # "8", or "1 (no batching)"
    settings: str = ""
    status: str = "ok"  # or "skipped: <reason>" / "failed: <reason>"
    utts: int = 0
    wer_percent: float | None = None
    errors: int | None = None
    ref_words: int | None = None
    rtfx: float | None = None
    median_s: float | None = None
    times_s: list[float] = field(default_factory=list)
    audio_s: float | None = None
    gpu_mib: float | None = None  # the figure shown, from gpu_source
    gpu_source: str = ""
    torch_peak_mib: float | None = None
    device_peak_mib: float | None = None
    own_mib: float | None = None
    wer_passes: list[float] = field(default_factory=list)  # each pass's WER %, the warm-up first


def _fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def table(rows: list[Row]) -> str:
    head = "| decoder | device | graph | batch | utts | WER % | RTFx | peak GPU MiB | settings |"
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        if r.status != "ok":
            lines.append(f"| {r.decoder} | {r.device} | {r.graph} | {r.batch} | - | - | - | - | {r.status} |")
            continue
        gpu = "-" if r.gpu_mib is None else f"{r.gpu_mib:.0f} ({r.gpu_source})"
        wer = f"{r.wer_percent:.2f} ({r.errors}/{r.ref_words})"
        if r.wer_passes and max(r.wer_passes) - min(r.wer_passes) > 1e-9:
            wer += f"; passes {min(r.wer_passes):.2f}-{max(r.wer_passes):.2f}"
        lines.append(f"| {r.decoder} | {r.device} | {r.graph} | {r.batch} | {r.utts} | {wer} | "
                     f"{_fmt(r.rtfx, '.1f')} | {gpu} | {r.settings} |")
    return "\n".join(lines)


NOTES = """\
- WER: kaldialign edit distance over word ids against the references; `<eps>`, `<s>`, `</s>`
  and `#k` are not scored, words missing from words.txt (greedy, torchaudio-ctc) count as errors.
  The WER is the last pass's; where the passes (warm-up included) disagree, `passes a-b` gives
  the range over them (riva's 1-best has differed from run to run on identical inputs).
- RTFx: audio seconds (sum of lengths x frame shift) over the wall seconds of decoding all
  utterances at that batch size, until the last word-id list is on the host; median of the
  timed passes after one warm-up pass. GPU peers read log-probs already on the GPU (one copy
  before timing, shared by the GPU peers, outside the timings and memory figures).
- Peak GPU memory, by source: `torch` = torch.cuda.max_memory_allocated() over the entry
  (reset before the peer is built) minus the staged log-probs; `own+torch` = the peer's own
  report of its native allocations (cuwfst: decoder buffers + winners arena + uploaded graph)
  plus that torch figure; `device` = cudaMemGetInfo's used memory over the entry minus its
  value before the peer was built (sampled every 20 ms and after the runs; includes torch's
  cache), for peers that allocate outside torch and report nothing.
- Peers that do not batch run once, shown as batch `1 (no batching)`."""


def markdown_section(rows: list[Row], machine: dict, commit: str, command: str, reps: int) -> str:
    m = machine
    vers = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items())
    out = [BEGIN, "## Peers: one run, identical inputs", "",
           f"Measured {m['date']} on {m['gpu'] or 'no GPU'}; CPU {m['cpu']}, {m['cores']} cores; "
           f"Python {m['python']}; commit `{commit}`; {reps} timed passes after one warm-up.", "",
           f"Command: `{command}`", "", f"Packages: {vers}.", "", table(rows), "", NOTES, "", "Settings:", ""]
    seen = set()
    for r in rows:
        if r.decoder not in seen and r.status == "ok":
            seen.add(r.decoder)
            out.append(f"- {r.decoder} ({r.device}, {r.graph}): {r.settings}")
    out += [END, ""]
    return "\n".join(out)


def write_section(path: str, section: str) -> None:
    """Replace the peers section of a markdown file, or append it (creating the file)."""
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    if BEGIN in text and END in text:
        a = text.index(BEGIN)
        b = text.index(END, a) + len(END)
        text = text[:a] + section.rstrip("\n") + text[b:]
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "# Benchmarks\n\n") + section
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def append_json(path: str, rows: list[Row], **common) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(dict(asdict(r), **common)) + "\n")
