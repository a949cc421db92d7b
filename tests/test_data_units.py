"""prepare's algorithms as plain functions (no Ray): reading with quarantine and byte
ranges, MinHash/LSH, candidate buckets, connected components, tokenization and loss
masks, packing, config validation."""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest

from agentworld.config import ConfigError
from agentworld.data import DataConfig
from agentworld.data.bin_packing import (
    best_fit_decreasing,
    efficiency,
    fewer_rows,
    minimum_bin_slack,
    pack_documents,
    pack_rows,
    rows_lower_bound,
)
from agentworld.data.chat_tokens import (
    ChatLayout,
    encode_trajectories,
    sft_sample,
    sft_windows,
    trajectory_messages,
)
from agentworld.data.components import components_in_memory, large_star, small_star
from agentworld.data.ingest_rows import INGEST_SCHEMA, ReaderSpec, plan_ranges, read_range
from agentworld.data.lsh import bucket_pairs
from agentworld.data.minhash import collision_probability, signature
from agentworld.data.synthetic import BAD_LINES, synthetic_corpus
from agentworld.data.text import jaccard, ngram_hashes, words
from agentworld.io import write_jsonl
from agentworld.schema import (
    Trajectory,
    Turn,
    predict_turn_messages,
    trajectory_to_chat,
    trajectory_to_rows,
)
from agentworld.schema.examples import sample_trajectories


def _read_all(url: str, split_bytes: int, **spec) -> pa.Table:
    ranges = plan_ranges([url], split_bytes=split_bytes, storage_options={})
    blocks = [b for r in ranges for b in read_range(r, ReaderSpec(block_records=7, **spec))]
    return pa.concat_tables(blocks) if blocks else INGEST_SCHEMA.empty_table()


def test_reader_quarantines_bad_lines_and_byte_ranges_read_each_line_once(tmp_path):
    trajs = sample_trajectories(30)
    lines = [t.to_json() for t in trajs]
    for i, bad in enumerate(BAD_LINES):
        lines.insert(3 * i + 1, bad)
    path = tmp_path / "part-00000.jsonl"
    path.write_text("\n".join(lines) + "\n")
    whole = _read_all(str(path), split_bytes=1 << 30)
    for split in (97, 500, 4096):
        parts = _read_all(str(path), split_bytes=split)
        assert sorted(parts.column("uid").to_pylist()) == sorted(whole.column("uid").to_pylist())
    status = whole.column("status").to_pylist()
    assert status.count("ok") == len(trajs) and status.count("quarantined") == len(BAD_LINES)
    bad = [r for r in whole.to_pylist() if r["status"] == "quarantined"]
    by_raw = {r["raw"]: r for r in bad}
    assert by_raw["{not json"]["error"] == "MalformedJSONError"
    assert by_raw[BAD_LINES[1]]["field"] == "turns" and by_raw[BAD_LINES[1]]["domain"] == "terminal"
    assert by_raw[BAD_LINES[2]]["error"] == "UnknownDomainError"
    assert by_raw[BAD_LINES[4]]["field"] == "turns"
    assert all(r["line"] == lines.index(r["raw"]) + 1 for r in bad)
    strict = _read_all(str(path), split_bytes=1 << 30, min_turns=3)  # a corpus rule on top
    short = [r for r in strict.to_pylist() if r["error"] == "min_turns"]
    assert len(short) == sum(len(t.turns) < 3 for t in trajs) > 0


def test_an_ingest_task_run_again_rewrites_its_own_staging_files(tmp_path):
    """Ray reruns a task whose worker died: the rerun must replace what the first try
    wrote, not add to it (the staging files hold every input line exactly once)."""
    from agentworld.data.placement import staging_files
    from agentworld.data.steps.ingest import feature_spec, ingest_range, reader_spec
    from agentworld.io import read_parquet

    path = tmp_path / "in" / "part-00000.jsonl"
    path.parent.mkdir()
    path.write_text(
        "\n".join([t.to_json() for t in sample_trajectories(40)] + list(BAD_LINES)) + "\n"
    )
    cfg, staging = DataConfig(block_records=7), str(tmp_path / "staging")
    ranges = plan_ranges([str(path)], split_bytes=2000, storage_options={})
    assert len(ranges) > 1
    kwargs = dict(
        reader=reader_spec(cfg, {}),
        features=feature_spec(cfg),
        index_holder=None,
        url=staging,
        storage_options={},
    )
    rows = [ingest_range(r, **kwargs) for r in ranges]
    first = sorted(staging_files(staging, {}))
    assert ingest_range(ranges[1], **kwargs) == rows[1]  # the retry
    assert sorted(staging_files(staging, {})) == first
    written = pa.concat_tables([read_parquet(f) for f in first])
    assert written.num_rows == sum(rows) == 40 + len(BAD_LINES)
    assert len(set(written.column("uid").to_pylist())) == written.num_rows


def test_reader_adapts_awb_rows_chat_and_gzip(tmp_path):
    trajs = sample_trajectories(4, seed=3)
    write_jsonl(str(tmp_path / "awb.jsonl"), [row for t in trajs for row in trajectory_to_rows(t)])
    chats = [
        {"id": t.id, "domain": "terminal", "source": "chat", "messages": trajectory_to_chat(t)}
        for t in trajs
    ]
    with gzip.open(tmp_path / "chat.jsonl.gz", "wt") as f:
        f.write("\n".join(json.dumps(c) for c in chats) + "\n")
    table = _read_all(str(tmp_path), split_bytes=1 << 20)
    assert table.column("status").to_pylist() == ["ok"] * 8  # AWB rows of one id merged
    records = [Trajectory.from_json(r) for r in table.column("record").to_pylist()]
    awb = [r for r in records if r.source == "agentworldbench"]
    assert [len(r.turns) for r in awb] == [len(t.turns) for t in trajs]
    assert awb[0].metadata["awb"]["turn_idx"] == list(range(1, len(trajs[0].turns) + 1))
    chat = [r for r in records if r.source == "chat"]
    assert [t.observation for t in chat[0].turns] == [t.observation for t in trajs[0].turns]


def test_minhash_estimates_jaccard_and_lsh_shape_favours_recall():
    corpus = synthetic_corpus(20, n_exact=0, n_near=10, n_far=10, n_families=0)
    originals = {t.id: t for t in corpus.records if t.id.startswith("base-")}
    cfg = DataConfig()
    bands, rows = cfg.lsh_shape()
    assert bands * rows <= cfg.num_perm
    assert (
        collision_probability(0.85, bands, rows)
        > 0.95
        > 0.5
        > collision_probability(0.5, bands, rows)
    )
    errors = []
    for copy in corpus.records:
        if copy.id in corpus.similarity:
            n = int(copy.id.split("-")[1])
            orig = originals[f"base-{(n + (0 if copy.id.startswith('near') else 10)) % 20:05d}"]
            a = ngram_hashes(words(orig.text()), 5)
            b = ngram_hashes(words(copy.text()), 5)
            estimate = float(np.mean(signature(a, 128) == signature(b, 128)))
            errors.append(abs(estimate - jaccard(a, b)))
    assert len(errors) == 20 and max(errors) < 0.15 and np.mean(errors) < 0.06


def test_oversized_bucket_is_linear_and_small_bucket_complete():
    small = bucket_pairs(np.array([5, 3, 9, 3]), all_pairs_max=8, anchors=2)
    assert small.tolist() == [[3, 5], [3, 9], [5, 9]]
    big = bucket_pairs(np.arange(1000), all_pairs_max=64, anchors=3)
    assert len(big) < 4 * 1000 and (big[:, 0] < big[:, 1]).all()
    assert len({tuple(p) for p in big.tolist()}) == len(big)


def _star_round(
    edges: list[tuple[int, int]], step, both: bool
) -> tuple[list[tuple[int, int]], int]:
    groups = defaultdict(list)
    for u, v in edges:
        if both:
            groups[u].append(v)
            groups[v].append(u)
        else:
            groups[max(u, v)].append(min(u, v))
    out, changed = [], 0
    for u, nbrs in groups.items():
        t = step(pa.table({"src": [u] * len(nbrs), "dst": nbrs}))
        out.extend(zip(t.column("u").to_pylist(), t.column("v").to_pylist(), strict=True))
        changed += sum(t.column("changed").to_pylist())
    return out, changed


@pytest.mark.parametrize("seed", range(5))
def test_large_small_star_finds_the_components_of_union_find(seed):
    rng = random.Random(seed)
    original = [(rng.randrange(200), rng.randrange(200)) for _ in range(150)]
    original = [(a, b) for a, b in original if a != b]
    edges = list(original)
    for _ in range(64):
        edges, c1 = _star_round(edges, large_star, both=True)
        edges, c2 = _star_round(edges, small_star, both=False)
        if c1 + c2 == 0:
            break
    # Converged: one star per component, centred on its smallest node.
    labels = {max(u, v): min(u, v) for u, v in edges} | {min(u, v): min(u, v) for u, v in edges}
    assert labels == components_in_memory(np.array(original))


@pytest.fixture(scope="module")
def tokenizer(corpus_texts):
    from agentworld.model import train_tokenizer

    return train_tokenizer(corpus_texts, vocab_size=512)


def test_sft_loss_mask_covers_exactly_the_observation(tokenizer):
    trajs = sample_trajectories(12, seed=5)
    trajs.append(
        Trajectory(
            id="ws",
            domain="terminal",
            source="t",
            environment="env",
            turns=(Turn(action="ls", observation="\n\n  lead"), Turn(action="x", observation="")),
        )
    )
    layout = ChatLayout.of(tokenizer)
    for traj, e in zip(trajs, encode_trajectories(tokenizer, layout, trajs), strict=True):
        full = tokenizer.apply_chat_template(trajectory_messages(traj), tokenize=False)
        assert tokenizer.decode(e.ids) == full
        for k in range(1, len(traj.turns) + 1):
            s = sft_sample(e, layout, "key", k, seq_len=4096, truncation="left")
            targets = tokenizer.decode(s.tokens[s.mask == 1])
            assert targets == traj.turns[k - 1].observation + "<|im_end|>"
            prompt = tokenizer.apply_chat_template(
                predict_turn_messages(traj, k), tokenize=False, add_generation_prompt=True
            )
            assert tokenizer.decode(s.tokens[: np.argmax(s.mask)]) == prompt


def test_a_worker_loads_the_trained_tokenizer_without_torch(tokenizer, tmp_path):
    """prepare's workers load the tokenizer it trained by its class, not through
    AutoTokenizer (whose import brings in torch, about 200 MiB per worker), and it
    renders and encodes exactly as the AutoTokenizer that training and serving load."""
    import subprocess
    import sys

    from transformers import AutoTokenizer

    from agentworld.data.vocab import save_tokenizer

    url = str(tmp_path / "tokenizer")
    save_tokenizer(tokenizer, url, {})
    traj = sample_trajectories(1)[0]
    messages = predict_turn_messages(traj, len(traj.turns))
    probe = (
        "import json, sys\n"
        "from agentworld.data.vocab import load_tokenizer\n"
        f"tok = load_tokenizer({url!r}, {{}})\n"
        f"text = tok.apply_chat_template({messages!r}, tokenize=False, add_generation_prompt=True)\n"
        "ids = tok.backend_tokenizer.encode(text, add_special_tokens=False).ids\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'text': text, 'ids': ids,"
        " 'pad': tok.pad_token_id, 'eos': tok.eos_token_id}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    assert loaded["torch"] is False
    auto = AutoTokenizer.from_pretrained(url)
    text = auto.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert loaded["text"] == text
    assert loaded["ids"] == auto.backend_tokenizer.encode(text, add_special_tokens=False).ids
    assert (loaded["pad"], loaded["eos"]) == (auto.pad_token_id, auto.eos_token_id)


def test_sft_prompt_tokens_are_the_ones_inference_feeds(corpus_texts):
    """Evaluate, RL and serve encode the templated prompt text whole; an earlier
    observation (or action) starting with whitespace merges with its header's newline
    there, and a sample's prompt must hold exactly those tokens."""
    from agentworld.data.chat_tokens import cpt_samples
    from agentworld.model import train_tokenizer

    # A corpus with numbered listings: the tokenizer learns "\n    " as one token.
    listing = "\n".join(f"     {i}\tdef f{i}():" for i in range(1, 9))
    tokenizer = train_tokenizer([*corpus_texts, *[listing] * 50], vocab_size=512)

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    assert ids("\n" + listing) != ids("\n") + ids(listing)  # the merge this is about

    turns = (
        Turn(action="cat -n a.py", observation=listing),
        Turn(action="  ls", observation="\n\n  lead"),
        Turn(action="echo hi", observation="hi"),
    )
    traj = Trajectory(id="ws", domain="swe", source="t", environment="env", turns=turns)
    layout = ChatLayout.of(tokenizer)
    e = encode_trajectories(tokenizer, layout, [traj])[0]
    full = tokenizer.apply_chat_template(trajectory_messages(traj), tokenize=False)
    assert e.ids.tolist() == ids(full)
    assert cpt_samples(e, "key", 4096)[0].tokens.tolist() == e.ids.tolist()
    for k in range(1, len(turns) + 1):
        s = sft_sample(e, layout, "key", k, seq_len=4096, truncation="left")
        prompt = tokenizer.apply_chat_template(
            predict_turn_messages(traj, k), tokenize=False, add_generation_prompt=True
        )
        assert s.tokens[: np.argmax(s.mask)].tolist() == ids(prompt)
        answer = [*ids(turns[k - 1].observation), tokenizer.eos_token_id]
        assert s.tokens[s.mask == 1].tolist() == answer


def test_sft_left_truncation_keeps_environment_or_drops_with_reason(tokenizer):
    traj = sample_trajectories(1, seed=11)[0]
    traj = Trajectory(
        id="long", domain="terminal", source="t", environment=traj.environment, turns=traj.turns * 4
    )
    layout = ChatLayout.of(tokenizer)
    e = encode_trajectories(tokenizer, layout, [traj])[0]
    k = len(traj.turns)
    limit = (e.starts[-1] - e.starts[1]) // 2 + e.starts[1]
    s = sft_sample(e, layout, "key", k, seq_len=limit, truncation="left")
    assert len(s.tokens) <= limit and s.truncated_turns > 0
    text = tokenizer.decode(s.tokens)
    assert text.startswith(f"<|im_start|>system\n{traj.environment}<|im_end|>")
    assert json.loads(s.messages_json)[0]["content"] == traj.environment
    assert len(json.loads(s.messages_json)) == 2 * (k - s.truncated_turns)
    assert sft_sample(e, layout, "key", k, seq_len=limit, truncation="drop") == "too_long"
    assert (
        sft_sample(e, layout, "key", k, seq_len=e.starts[1] + 2, truncation="left")
        == "too_long_after_truncation"
    )


def _samples(e, layout, turns: int, seq_len: int) -> dict:
    out = {}
    for k in range(1, turns + 1):
        s = sft_sample(e, layout, "key", k, seq_len=seq_len, truncation="left")
        if not isinstance(s, str):
            out[k] = s
    return out


def test_sft_windows_train_each_answer_once_in_its_own_samples_context(tokenizer):
    """data.sft_rows=trajectory: the rows hold every sample's target once, in order;
    each row starts as its first new turn's sample; every answer's context is the
    system message and the latest turns of its sample's; a trajectory that fits is one
    row, the whole conversation. (Text is compared where an answer starting with
    whitespace is one token with its header's newline in the whole text.)"""
    trajs = sample_trajectories(12, seed=5)
    long = Trajectory(
        id="long", domain="terminal", source="t", environment=trajs[0].environment,
        turns=trajs[0].turns * 4,
    )  # fmt: skip
    spaced = Trajectory(
        id="ws", domain="swe", source="t", environment="env",
        turns=(Turn(action="ls", observation="\n\n  lead"), Turn(action="x", observation="y")),
    )  # fmt: skip
    layout = ChatLayout.of(tokenizer)
    trajs = [*trajs, long, spaced]
    for traj, e in zip(trajs, encode_trajectories(tokenizer, layout, trajs), strict=True):
        st, sys_end = e.starts, e.starts[1]
        turn = max(st[2 * k + 1] - st[2 * k - 1] for k in range(1, len(traj.turns) + 1))
        for seq_len in (4096, sys_end + 2 * turn + 2):  # every turn fits alone, two at least
            samples = _samples(e, layout, len(traj.turns), seq_len)
            rows = sft_windows(e, layout, "key", samples, seq_len)
            assert all(r.kind == "sft_window" and r.tokens.size <= seq_len for r in rows)
            targets = [t for r in rows for t in r.tokens[r.mask == 1].tolist()]
            assert targets == [t for s in samples.values() for t in s.tokens[s.mask == 1].tolist()]
            if seq_len == 4096:
                assert len(rows) == 1 and tokenizer.decode(rows[0].tokens) == tokenizer.decode(
                    e.ids
                )
            done = 0
            for r in rows:
                ends = np.flatnonzero(np.diff(np.concatenate([r.mask, [0]])) == -1) + 1
                starts = np.flatnonzero(np.diff(np.concatenate([[0], r.mask])) == 1)
                mine = [k for k in samples if k > done][: starts.size]
                first = samples[mine[0]]
                assert tokenizer.decode(r.tokens[: ends[0]]) == tokenizer.decode(
                    first.tokens[: np.flatnonzero(first.mask)[-1] + 1]
                )
                for k, begin in zip(mine, starts, strict=True):
                    s = samples[k]
                    context = s.tokens[: np.argmax(s.mask)]
                    assert r.tokens[:sys_end].tolist() == context[:sys_end].tolist()
                    text = tokenizer.decode(context[sys_end:])
                    assert text.endswith(tokenizer.decode(r.tokens[sys_end:begin]))
                    done = k
            assert done == max(samples)
        assert len(rows) > 1 or traj is not long


def test_sft_windows_keep_the_samples_where_the_conversation_renders_otherwise(tokenizer):
    """An answer with the simulator's reasoning is trained with it, while the history
    of a later turn shows the observation alone: no row could hold both, so the
    samples stay as they are."""
    traj = sample_trajectories(1, seed=3)[0]
    turns = tuple(dataclasses.replace(t, simulator_reasoning="look first") for t in traj.turns)
    traj = dataclasses.replace(traj, turns=turns)
    layout = ChatLayout.of(tokenizer)
    e = encode_trajectories(tokenizer, layout, [traj])[0]
    samples = _samples(e, layout, len(turns), 4096)
    rows = sft_windows(e, layout, "key", samples, 4096)
    assert [r.tokens.tolist() for r in rows] == [s.tokens.tolist() for s in samples.values()]
    assert [r.mask.tolist() for r in rows] == [s.mask.tolist() for s in samples.values()]


def test_pack_takes_the_sft_rows_the_config_names():
    """With data.sft_rows=trajectory the whole-conversation rows are packed as SFT's
    training rows and the per-turn samples are not; dropped samples never are."""
    from agentworld.data.packed_shards import assign_group
    from agentworld.data.steps.pack import SFT_ROWS

    kinds = ["cpt", "sft", "sft", "sft_window", "sft_window"]
    block = pa.table(
        {
            "kind": kinds,
            "split": ["train"] * 5,
            "key": [f"k{i}" for i in range(5)],
            "tokens": [[1, 2]] * 5,
            "mask": [[0, 1]] * 5,
            "drop_reason": [None, None, "too_long", None, "too_long"],
        }
    )
    groups = {"cpt/train": 1, "sft/train": 1}
    for rows, keys in (("turn", ["k0", "k1"]), ("trajectory", ["k0", "k3"])):
        tagged = assign_group(block, groups=groups, kinds={"cpt": "cpt", SFT_ROWS[rows]: "sft"})
        assert tagged.column("key").to_pylist() == keys
        assert tagged.column("kind").to_pylist() == ["cpt", "sft"]
        assert tagged.column("shard").to_pylist()[1].startswith("sft/train/")


def test_best_fit_decreasing_packs_each_document_once_without_crossing():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 300, size=400).tolist()
    tokens = [np.full(n, i, dtype=np.int32) for i, n in enumerate(lengths)]
    masks = [np.ones(n, dtype=np.int8) for n in lengths]
    table = pack_documents(
        tokens, masks, [f"d{i}" for i in range(400)], seq_len=512, pad_id=-1, seed=0
    )
    assert efficiency(table, 512) > 0.97
    seen = []
    for row in table.to_pylist():
        ids, pos, lens = np.array(row["input_ids"]), np.array(row["position_ids"]), row["doc_lens"]
        at = 0
        for n in lens:
            doc = ids[at : at + n]
            assert (doc == doc[0]).all() and lengths[doc[0]] == n  # one whole document
            assert (pos[at : at + n] == np.arange(n)).all()  # positions restart per document
            seen.append(int(doc[0]))
            at += n
        assert (ids[at:] == -1).all() and not any(row["loss_mask"][at:])
    assert sorted(seen) == list(range(400))
    bins = best_fit_decreasing([5, 5, 5], ["a", "b", "c"], 10)
    assert bins == [[(0, 0, 5), (1, 0, 5)], [(2, 0, 5)]]


def test_packed_shards_are_written_a_chunk_at_a_time_with_the_rows_of_a_whole_pack(tmp_path):
    """The pack step's shard holds exactly pack_documents' rows, in its order, written
    as row groups of at most chunk_rows rows; the samples step's shard holds its group
    sorted, also a bounded row group at a time."""
    import pyarrow.parquet as pq

    from agentworld.data.bin_packing import packed_chunks
    from agentworld.data.hashed_shards import write_group
    from agentworld.data.packed_shards import pack_group

    rng = np.random.default_rng(2)
    lengths = rng.integers(5, 200, size=900).tolist()
    tokens = [rng.integers(0, 50, size=n).astype(np.int32) for n in lengths]
    masks = [(rng.random(n) < 0.5).astype(np.int8) for n in lengths]
    keys = [f"d{i:03d}" for i in range(900)]
    whole = pack_documents(tokens, masks, keys, seq_len=256, pad_id=-1, seed=5)
    chunks = list(packed_chunks(tokens, masks, keys, seq_len=256, pad_id=-1, seed=5, chunk_rows=64))
    assert len(chunks) > 3 and max(c.num_rows for c in chunks) == 64
    assert pa.concat_tables(chunks).equals(whole)

    group = pa.table(
        {
            "kind": ["sft"] * 900,
            "split": ["train"] * 900,
            "key": keys,
            "tokens": pa.array([t.tolist() for t in tokens], pa.list_(pa.int32())),
            "mask": pa.array([m.tolist() for m in masks], pa.list_(pa.int8())),
            "shard": ["sft/train/part-00000.parquet"] * 900,
        }
    )
    kwargs = dict(
        base_url=str(tmp_path), seq_len=256, pad_id=-1, seed=5, cpt_split_min=0, chunk_rows=64
    )
    stats = pack_group(group, storage_options={}, **kwargs).to_pylist()[0]
    shard = pq.ParquetFile(tmp_path / "sft/train/part-00000.parquet")
    assert shard.metadata.num_row_groups > 1
    assert max(shard.metadata.row_group(i).num_rows for i in range(shard.num_row_groups)) == 64
    written = shard.read()
    assert written.num_rows == stats["rows"] and stats["docs"] == 900
    assert stats["tokens"] == sum(lengths) and stats["targets"] == int(sum(m.sum() for m in masks))
    # Same rows as packing the group whole, with the seed the shard's name gives.
    from agentworld.data.text import hash64

    seed = (5 ^ hash64("sft/train/part-00000.parquet")) & 0xFFFFFFFF
    assert written.equals(pack_documents(tokens, masks, keys, seq_len=256, pad_id=-1, seed=seed))
    # A rerun keeps the shard and counts it the same.
    assert pack_group(group, storage_options={}, **kwargs).to_pylist()[0] == stats

    order = rng.permutation(900)
    rows = pa.table(
        {
            "t": [f"t{i // 7:03d}" for i in order],
            "turn": [int(i % 7) for i in order],
            "shard": ["s"] * 900,
        }
    )
    write_group(
        rows,
        base_url=str(tmp_path / "samples"),
        columns=["t", "turn"],
        sort_by=["t", "turn"],
        skip_existing=False,
        storage_options={},
        chunk_rows=100,
    )
    shard = pq.ParquetFile(tmp_path / "samples" / "s")
    assert shard.num_row_groups == 9
    assert shard.read().to_pylist() == sorted(
        rows.select(["t", "turn"]).to_pylist(), key=lambda r: (r["t"], r["turn"])
    )


def test_minimum_bin_slack_fills_rows_better_and_keeps_documents_whole():
    # Best fit puts 3 beside 6 and needs a fourth row; the best subset per row needs three.
    lengths, keys = [6, 5, 2, 9, 3, 2, 2], list("abcdefg")
    assert len(best_fit_decreasing(lengths, keys, 10)) == 4
    rows = minimum_bin_slack(lengths, keys, 10)
    assert sorted(sorted(p[0] for p in r) for r in rows) == [[0, 2, 5], [1, 4, 6], [3]]
    rng = np.random.default_rng(1)
    for high in (300, 1000):
        lengths = rng.integers(20, high, size=500).tolist()
        keys = [f"d{i:03d}" for i in range(500)]
        rows = pack_rows(lengths, keys, 1024)
        assert sorted(i for r in rows for i, _, _ in r) == list(range(500))
        assert all(end - start == lengths[i] for r in rows for i, start, end in r)
        fills = [sum(end - start for _, start, end in r) for r in rows]
        assert max(fills) <= 1024 and sum(f <= 512 for f in fills) <= 1
        assert len(rows) <= len(best_fit_decreasing(lengths, keys, 1024))
    with pytest.raises(ValueError, match="more than 10"):
        minimum_bin_slack([11], ["long"], 10)


def test_an_exact_search_packs_short_documents_into_the_long_ones_gaps():
    # Minimum bin slack and best fit both need 10 rows here; 9 hold every token, and
    # the integer program finds them. The lower bound counts tokens and long documents.
    lengths = [111, 633, 853, 137, 261, 344, 117, 156, 1000, 924, 797, 250, 977, 811, 476]
    lengths += [345, 219, 446]
    keys = [f"d{i:03d}" for i in range(len(lengths))]
    heuristic = min(
        len(minimum_bin_slack(lengths, keys, 1024)), len(best_fit_decreasing(lengths, keys, 1024))
    )
    assert heuristic == 10 and rows_lower_bound(lengths, 1024) == 9
    rows = pack_rows(lengths, keys, 1024)
    assert len(rows) == 9
    assert sorted(i for r in rows for i, _, _ in r) == list(range(len(lengths)))
    assert all(end - start == lengths[i] for r in rows for i, start, end in r)
    assert max(sum(end - start for _, start, end in r) for r in rows) <= 1024
    assert pack_rows(lengths, keys, 1024) == rows  # a node limit, not a clock: the same rows
    assert fewer_rows(lengths, keys, 1024, 8) is None  # fewer than the tokens need


def test_data_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="data.near_dup_threshold"):
        DataConfig(near_dup_threshold=1.5)
    with pytest.raises(ConfigError, match="data.lsh_bands"):
        DataConfig(lsh_bands=20, lsh_rows=10)
    with pytest.raises(ConfigError, match="data.survivor_priority"):
        DataConfig(survivor_priority=("newest",))
    with pytest.raises(ConfigError, match="data.num_workers"):
        DataConfig(num_workers=0)
    assert DataConfig(lsh_bands=16, lsh_rows=8).lsh_shape() == (16, 8)


def test_prepare_job_rejects_bad_config_and_missing_inputs_before_any_work(tmp_path):
    import importlib.util
    from pathlib import Path

    from agentworld.data.run import check_inputs

    path = Path(__file__).resolve().parents[1] / "jobs" / "prepare.py"
    spec = importlib.util.spec_from_file_location("prepare_job", path)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    out = str(tmp_path / "out")

    def build(*extra: str):
        return cli.build_job(cli.parse_args(["--input", str(tmp_path), "--out", out, *extra]))

    with pytest.raises(ConfigError, match="data.bogus"):
        build("--set", "data.bogus=1")
    with pytest.raises(ConfigError, match="data.eval_fraction"):
        build("--set", "data.eval_fraction=1.5")
    with pytest.raises(ConfigError, match="recipe"):
        build("--recipe", "nope")
    assert build("--set", "data.near_dup_threshold=0.9").data.near_dup_threshold == 0.9
    with pytest.raises(FileNotFoundError, match="eval set .*missing"):
        check_inputs(build("--eval-sets", str(tmp_path / "missing")))
    assert not (tmp_path / "out").exists()
