"""How the grade is shown: the grade page (MyST), the terminal table and the plain sentences.

Every view shows, per claim, the same three things in the same order: one plain sentence a
reader outside the field understands (:func:`plain_sentence`), the substitutions (each aspect
in which the run differs from the paper's setting), then the statements with their verdicts.
Symbols are typeset (:func:`typeset`: ε, ≤, →) rather than shown as machine ASCII.
"""

from __future__ import annotations

import re
import textwrap

from paperlib.artifact.prose import clauses
from paperlib.artifact.tables import chapter_of

__all__ = ["CLAIM_GROUPS", "claim_group", "summary_counts", "reason_line", "OUR_ADDITION", "VERDICT_RULE", "PLAIN_ASPECT", "typeset", "setting_name", "verdict_label", "item_label", "id_item", "plain_sentence",
           "headline", "render_markdown", "render_text", "chapter_grade"]

#: What follows the item of a claim beyond the paper wherever claims are listed.
OUR_ADDITION = "(our addition)"

#: The one sentence that says what each verdict means (grade page, appendix).
VERDICT_RULE = ("A verdict is *reproduced* when the claim ran on the paper's setting and every graded statement "
                "holds on the stored numbers. The paper's setting is its data split, models, releases, code paths, "
                "trial count and distinguisher, with every round a real step. A claim is *partly reproduced* when no "
                "statement is contradicted but the run differs from that setting in a listed way, or cannot settle "
                "a statement at its trial count. It is *not reproduced* when a computed number contradicts a "
                "statement the paper makes, or when a real-data claim ran on synthetic data. It is *not run* when a "
                "result is missing. What this artifact found beyond or against the paper is listed apart, under "
                "*Findings*, and never graded as the paper's.")

# (pattern, unicode, MyST math) in the order they are applied
_SYMBOLS = (
    (r"\beps_L\b", "ε_L", "$\\varepsilon_L$"),
    (r"\beps_U\b", "ε_U", "$\\varepsilon_U$"),
    (r"\beps_hat\b", "ε̂", "$\\hat\\varepsilon$"),
    (r"\beps\b", "ε", "ε"),
    (r"\bdelta\b", "δ", "δ"),
    (r"\bsigma\b", "σ", "σ"),
    (r"<=", "≤", "≤"),
    (r">=", "≥", "≥"),
    (r"->", "→", "→"),
    (r"(?<=\d) x (?=RDP)", " × ", " × "),
    (r"(?<=\d)x(?= the\b)", " ×", " ×"),
    (r"\|dFPR\|", "|ΔFPR|", "|ΔFPR|"),
    (r"(?<=[\d)]) - (?=[\d(a-zA-Z$])", " − ", " − "),
)
#: A count of five digits or more after ``n=`` / ``N = `` (a model size, a data set size) gets its
#: thousands separators: ``n=26010`` → ``n=26,010``.
_BIG_COUNT = re.compile(r"\b([nN] ?= ?)(\d{5,})\b(?![.\d])")


def typeset(text: str, *, markdown: bool = False) -> str:
    """*text* with the grade's ASCII symbols typeset: ``eps_L`` → ε_L, ``<=`` → ≤, ``->`` → →.

    ``markdown=True``: the subscripted symbols become MyST math (``$\\varepsilon_L$``); the text
    must then already be escaped for Markdown (it is typeset after :func:`_md_escape`, which
    this function undoes for the symbols it replaces).
    """
    s = str(text)
    if markdown:
        s = s.replace("\\_", "_").replace("\\<", "<").replace("\\>", ">")
    for pat, uni, md in _SYMBOLS:
        s = re.sub(pat, lambda _m, r=(md if markdown else uni): r, s)
    s = _BIG_COUNT.sub(lambda m: m.group(1) + f"{int(m.group(2)):,}", s)
    if markdown:  # underscores and angle brackets left are literal text again
        parts = re.split(r"(\$[^$]*\$)", s)
        s = "".join(p if p.startswith("$") else p.replace("_", "\\_").replace("<", "\\<").replace(">", "\\>")
                    for p in parts)
    return s


def verdict_label(c: dict) -> str:
    """The verdict as shown: ``"reproduced from committed data"`` when the claim's basis says so."""
    v = str(c.get("verdict", ""))
    return f"{v} from committed data" if c.get("basis") and v == "reproduced" else v


def mode_phrase(mode) -> str:
    """How a record's mode reads in a sentence: ``"quick mode"``; ``"from the stored table"`` for a
    claim read from committed data (its mode is ``"stored table"``)."""
    mode = str(mode)
    return "from the stored table" if mode == "stored table" else f"{mode} mode"


def item_label(c) -> str:
    """The claim's item as listed: ``"Fig. 6"``, or ``"the fix (our addition)"`` beyond the paper.
    *c*: a claim (attributes ``item``, ``beyond_paper``) or a graded record (keys)."""
    item, beyond = ((c.get("item", ""), c.get("beyond_paper")) if isinstance(c, dict) else (c.item, c.beyond_paper))
    return f"{item} {OUR_ADDITION}" if beyond else str(item)


def id_item(c) -> str:
    """``"C6 (Fig. 6)"``; beyond the paper ``"X1 (the fix; our addition)"``."""
    cid, item, beyond = ((c.get("id", ""), c.get("item", ""), c.get("beyond_paper")) if isinstance(c, dict)
                         else (c.id, c.item, c.beyond_paper))
    return f"{cid} ({item}; {OUR_ADDITION.strip('()')})" if beyond else f"{cid} ({item})"


def _count(k: int, one: str, many: str | None = None) -> str:
    return f"{k} {one if k == 1 else (many or one + 's')}"


#: Each aspect of :data:`paperlib.artifact.grading.setting.ASPECTS` in words a reader outside the field
#: understands (the plain sentence names the aspects so; the detail below it gives the numbers).
PLAIN_ASPECT = {
    "data": "made-up data in place of real images",
    "split": "images from another split of the data set",
    "model": "another model",
    "release": "another version of the software",
    "code path": "a rebuilt or different program",
    "real steps": "some training steps simulated",
    "trials": "fewer repetitions of the attack",
    "distinguisher": "another attack",
    "parameters": "other settings",
    "inputs": "inputs that were not recorded",
}


def setting_name(c: dict) -> str:
    """Whose setting a claim's substitutions are against: "the paper's setting", or for a claim of
    this artifact beyond the paper (``beyond_paper``) "this claim's setting"."""
    return "this claim's setting" if c.get("beyond_paper") else "the paper's setting"


def plain_sentence(c: dict) -> str:
    """A few short sentences a reader outside the field understands: what the claim says, the verdict,
    and in plain words why it is not *reproduced* (the substitutions' aspects, the statements
    the run contradicts or cannot resolve)."""
    v = c.get("verdict")
    what = str(c.get("plain") or c.get("statement") or "").rstrip(".")
    if v == "not applicable":
        return f"{what}. It is a drawing, with nothing to measure."
    reasons = c.get("reasons") if isinstance(c.get("reasons"), list) else []
    aspects = list(dict.fromkeys(f.get("aspect", "inputs") for f in c.get("fidelity") or []))
    violated = sum(r.get("kind") == "violated" for r in reasons)
    unresolved = sum(r.get("kind") == "unresolved" for r in reasons)
    missing = sum(r.get("kind") == "incomplete" for r in reasons)
    if v == "not run":
        return f"{what}. Not run: {c.get('reason') or 'a result is missing'}."
    if v == "reproduced":
        tail = " It was read from the committed table, which this build did not recompute." if c.get("basis") else ""
        if c.get("beyond_paper"):
            return f"{what}. Every statement of this claim holds, on its own setting.{tail}"
        return f"{what}. Every statement the paper makes here holds, on the paper's own setting.{tail}"
    why = []
    if v == "partly reproduced":
        why.append("Nothing measured contradicts it.")
    if violated:
        why.append(f"This run's numbers contradict {_count(violated, 'statement')} "
                   + ("of this claim." if c.get("beyond_paper") else "the paper makes here."))
    if aspects:
        why.append(f"The run differs from {setting_name(c)} in {_count(len(aspects), 'way')}: "
                   f"{_and(PLAIN_ASPECT.get(a, a) for a in aspects)}.")
    if unresolved:
        why.append(f"This run could not settle {_count(unresolved, 'statement')}: too few trials, or points outside "
                   "what the paper states.")
    if missing:
        why.append(f"{_count(missing, 'statement').capitalize()} could not be computed.")
    if len(why) <= (v == "partly reproduced"):
        why.append(f"The reason: {c.get('reason') or 'none recorded'}.")
    return f"{what}. " + " ".join(why)


def _and(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def headline(c: dict) -> str:
    """What a table shows for claim record *c*: its plain sentence."""
    return plain_sentence(c)


def _md_escape(s: str) -> str:
    out = []
    for ch in str(s):
        out.append("\\" + ch if ch in "\\`*_{}[]<>#|$~^" else ch)
    return "".join(out).replace("\n", " ")


def _md(s: str) -> str:
    return typeset(_md_escape(s), markdown=True)


def reason_line(c: dict) -> str:
    """Why a claim got its verdict, in one short line (the grade page's table): what differs from the
    paper's setting and how many statements the run could not settle, the first contradicted statement,
    or what is missing."""
    v = c.get("verdict")
    if v in ("not applicable", "not run"):
        return str(c.get("reason") or v)
    reasons = c.get("reasons") or []
    if v == "not reproduced":
        bad = next((r["text"] for r in reasons if r.get("kind") == "violated"), None)
        return f"contradicted: {bad}" if bad else "run on synthetic data in place of real points"
    aspects = list(dict.fromkeys(f.get("aspect", "?") for f in c.get("fidelity") or []))
    unres = sum(r.get("kind") == "unresolved" for r in reasons)
    out = []
    if aspects:
        out.append("differs: " + ", ".join(aspects))
    if unres:
        out.append(f"{unres} unsettled")
    if not out:
        return "all statements hold" + ("; committed data" if c.get("basis") else "")
    return "; ".join(out)


def _sub_bullets(text: str) -> list[str]:
    """A generated detail as a nested list, one item per clause (:func:`paperlib.artifact.prose.clauses`): a
    reader scans the items instead of one sentence of many clauses."""
    return [f"  - {_md(x)}" for x in clauses(text)]


def _where(c: dict) -> str:
    """The chapter that shows a claim, as a MyST document link (the introduction for a claim without one)."""
    nb = c.get("notebook")
    if not nb:
        return "{doc}`introduction <intro>`"
    try:
        num = f" {chapter_of(nb)}"  # the book numbers its chapters by their notebooks' prefixes
    except ValueError:
        num = ""
    return f"{{doc}}`chapter{num} <notebooks/{nb}>`"


def render_markdown(g: dict) -> str:
    """A MyST page: a table of every claim (verdict, one-line reason, its chapter) within the first screen,
    the counts, the rule behind the verdicts, then each claim's details folded, then the findings of this
    artifact apart from the verdicts."""
    lines = [
        "# The grade of each claim",
        "",
        "```{container} paperlib-grade",
        "| Claim | Verdict | Why | Where |",
        "| --- | --- | --- | --- |",
    ]
    for c in g["claims"]:
        lines.append(f"| {_md_escape(c['id'])} ({_md_escape(c['item'])}) | {_md_escape(verdict_label(c))} | "
                     f"{_md(reason_line(c))} | {_where(c)} |")
    ours = [c["id"] for c in g["claims"] if claim_group(c) == "ours"]
    lines += ["```", "", (f"{_id_range(ours)}: our additions, beyond the paper. " if ours else "")
              + "Summary: " + summary_counts(g) + ".", "",
              "Generated by `make grade` from the result files of this run. " + VERDICT_RULE + " Audited values "
              "are 95% Clopper-Pearson lower bounds, so \"above the claim\" needs no extra margin. A trend is read "
              "over all its points, with their intervals.", "",
              "## In one sentence each", ""]
    for c in g["claims"]:
        lines.append(f"- {_md_escape(id_item(c))}, {_md_escape(verdict_label(c))}. {_md(plain_sentence(c))}")
    lines += ["", "## Details", "", "Each claim's statements, measurements and differences, folded.", ""]
    for c in g["claims"]:
        lines.append(f":::{{dropdown}} {_md_escape(id_item(c))}: {_md_escape(verdict_label(c))}")
        lines.append("")
        lines.append(_md(plain_sentence(c)))
        lines.append("")
        lines.append("- Claim:")
        lines += _sub_bullets(c["statement"])
        lines.append(f"- The paper: {_md(c['paper'])}")
        if c.get("basis"):
            lines.append(f"- Basis: {_md(c['basis'])}")
        fid = c.get("fidelity") or []
        if fid:
            lines.append(f"- Differs from {setting_name(c)}:")
            for f in fid:
                lines.append(f"  - {_md(f['reason'])} ({_md_escape(f['verdict'])})")
        elif c.get("verdict") not in ("not applicable", "not run"):
            lines.append(f"- Matches {setting_name(c)} in everything the results record")
        for p in c["parts"]:
            tag = "info, not graded" if not p["graded"] else p.get("verdict", "info")
            # a dash, not a full stop: the detail often opens with a symbol ("n=10", "eps_L") that has no capital
            lines.append(f"- Statement, {_md_escape(tag)}: {_md(p['name'])}")
            lines += _sub_bullets(p["detail"])
        lines.append(f"- Measured ({_md_escape(mode_phrase(c['mode']))}):")
        lines += _sub_bullets(c["measured"])
        if c.get("expected_full"):
            lines.append("- Expected in full mode:")
            lines += _sub_bullets(c["expected_full"])
        lines += ["", ":::", ""]
    lines += ["## Findings of this artifact (not verdicts on the paper)", ""]
    fnd = g.get("findings") or []
    lines += [f"- {_md_escape(f['claim'])}: {_md(f['text'])}" for f in fnd] or ["- none in this run"]
    lines.append("")
    lines.append("Summary: " + summary_counts(g) + ". "
                 f"Commit `{g['git_commit']}`{' (dirty)' if g.get('git_dirty') else ''}, {g['created_utc']}.")
    return "\n".join(lines) + "\n"


#: how the summary counts claims apart: the paper's claims checked by this run, the paper's claims read from
#: data committed with the artifact (not recomputed by this build), and this artifact's own additions
CLAIM_GROUPS = {"paper": "the paper's claims", "committed": "read from committed data", "ours": "our additions"}


def claim_group(c: dict) -> str:
    """The summary group of an evaluated claim (:data:`CLAIM_GROUPS`)."""
    if c.get("beyond_paper"):
        return "ours"
    return "committed" if c.get("basis") else "paper"


def summary_counts(g: dict) -> str:
    """The grade's counts, the paper's claims apart from those read from committed data and from our additions:
    "the paper's claims (C1-C7): 2 reproduced, 4 partly reproduced, 1 not applicable; read from committed data
    (C8): 1 reproduced; our additions (X1): 1 partly reproduced". Verdicts with no claim are left out; a grade
    written before the groups existed gives its plain counts."""
    groups = g.get("counts_by_group")
    if not groups:
        return ", ".join(f"{g['counts'].get(v, 0)} {v}" for v in g["counts"])
    out = []
    for key, name in CLAIM_GROUPS.items():
        grp = groups.get(key) or {}
        ids = grp.get("claims") or []
        if not ids:
            continue
        counts = ", ".join(f"{k} {v}" for v, k in (grp.get("counts") or {}).items() if k)
        out.append(f"{name} ({_id_range(ids)}): {counts}")
    return "; ".join(out)


def _id_range(ids: list[str]) -> str:
    """``["C1", ..., "C7"]`` as "C1-C7" when consecutive, else joined with commas."""
    nums = [int(i[1:]) for i in ids if i[1:].isdigit()]
    if len(ids) > 2 and len(nums) == len(ids) and len({i[0] for i in ids}) == 1 and nums == list(range(nums[0], nums[-1] + 1)):
        return f"{ids[0]}–{ids[-1]}"
    return ", ".join(ids)


def chapter_grade(c: dict) -> str:
    """The grade of one claim as its chapter closes with it (MyST Markdown): the same plain sentence,
    substitutions (one list), expectation for full mode and findings as the grade page, so the
    chapter and the grade cannot differ. *c*: a claim record (:func:`paperlib.artifact.claims.require`).
    Only the claim's label is bold (a bold paragraph would hide the sentence's own emphasis)."""
    # a verdict read from committed data says so itself ("reproduced from committed data"): no mode after it
    mode = "" if verdict_label(c) != str(c.get("verdict", "")) else f" ({_md_escape(mode_phrase(c.get('mode')))})"
    lines = [f"**The grade of {_md_escape(id_item(c))}: {_md_escape(verdict_label(c))}**{mode}. "
             f"{_md(plain_sentence(c))}", ""]
    def bullets(head: str, items: list[str]) -> list[str]:
        return [head, "", *(f"- {x}" for x in items), ""] if items else []

    fid = c.get("fidelity") or []
    lines += bullets(f"Differs from {setting_name(c)}:", [f"{_md(f['reason'])} ({_md_escape(f['verdict'])})"
                                                           for f in fid])
    if not fid and c.get("verdict") not in ("not applicable", "not run"):
        lines += [f"Matches {setting_name(c)} in everything the results record.", ""]
    if c.get("expected_full"):
        lines += bullets("Expected in full mode:", [_md(x) for x in clauses(c["expected_full"])])
    lines += bullets("Found by this artifact, apart from the verdict (not the paper's statements):",
                     [_md(t) for t in c.get("findings") or []])
    lines.append("Every statement and its detail: [the grade page](../grade.md).")
    return "\n".join(lines) + "\n"


def _wrap(label: str, text: str, pad: str, width: int = 110) -> list[str]:
    head = f"{label:<10}" if len(label) < 10 else label + " "  # a long label ("C2 (Fig. 2):") keeps its space
    return textwrap.wrap(str(text), width=width, initial_indent=pad + head, subsequent_indent=pad + " " * 10,
                         break_on_hyphens=False) or [f"{pad}{label}"]


def render_text(g: dict) -> str:
    """The grade table for the terminal (``make all`` prints it): the same sentence, substitutions
    and statements as the grade page, in the same order."""
    lines = [f"{'claim':<5} {'item':<8} {'verdict':<32} {'mode':<12}", "-" * 110]
    pad = " " * 6
    for c in g["claims"]:
        mode = c["mode"] if len(c["mode"]) <= 12 else c["mode"][:12]
        lines.append(f"{c['id']:<5} {c['item']:<8} {verdict_label(c):<32} {mode:<12}")
        lines += _wrap("in short:", typeset(plain_sentence(c)), pad)
        if c.get("beyond_paper"):
            lines += _wrap("scope:", "our addition, beyond the paper (a claim of this artifact)", pad)
        for f in c.get("fidelity") or []:
            lines += _wrap("differs:", typeset(f"{f['reason']} ({f['verdict']})"), pad)
        for p in c.get("parts", []):
            if p.get("graded"):
                lines += _wrap("graded:", typeset(f"{p.get('verdict', '?')}: {p['name']}"), pad)
        lines += _wrap("measured:", typeset(c["measured"]), pad)
    fnd = g.get("findings") or []
    if fnd:
        lines += ["-" * 110, "Findings of this artifact (not verdicts on the paper):"]
        for f in fnd:
            lines += _wrap(f"{f['claim']}:", typeset(f["text"]), "  ")
    lines.append("-" * 110)
    lines.append(summary_counts(g) + f"  (read from {str(g['results_dir']).rstrip('/')}/)")
    return "\n".join(lines)
