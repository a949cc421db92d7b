"""Object storage: shards and manifests on local paths, file:// and the real S3 protocol
(s3fs against a local moto server); atomic writes survive a killed writer."""

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from agentworld.io import (
    exists,
    get_fs,
    is_complete,
    list_shards,
    read_manifest,
    read_parquet,
    read_records,
    write_jsonl,
    write_manifest,
    write_parquet,
)
from agentworld.io.shards import iter_records
from agentworld.schema.arrow import from_arrow_table
from agentworld.schema.examples import sample_trajectories


@pytest.fixture(params=["path", "file", "s3"])
def base_url(request, tmp_path):
    if request.param == "path":
        return str(tmp_path / "store")
    if request.param == "file":
        return f"file://{tmp_path}/store"
    return request.getfixturevalue("s3_bucket") + "/store"


def test_shards_round_trip(base_url):
    trajs = sample_trajectories(7)
    write_jsonl(f"{base_url}/shards/part-00000.jsonl", trajs[:4])
    write_parquet(f"{base_url}/shards/part-00001.parquet", trajs[4:])
    shards = list_shards(f"{base_url}/shards")
    assert [s.rsplit("/", 1)[-1] for s in shards] == ["part-00000.jsonl", "part-00001.parquet"]
    result = read_records(f"{base_url}/shards")
    assert result.records == trajs and result.rejected == []
    assert from_arrow_table(read_parquet(shards[1])) == trajs[4:]


def test_manifest_round_trip(base_url):
    run = f"{base_url}/run-1"
    assert read_manifest(run) is None and not is_complete(run)
    write_manifest(run, stage="prepare", inputs=["s3://x"], config={"a": 1}, counts={"read": 3})
    m = read_manifest(run)
    assert m["stage"] == "prepare" and m["counts"] == {"read": 3} and m["code_version"]
    assert is_complete(run)


def test_gzip_jsonl_streams(tmp_path):
    import gzip

    trajs = sample_trajectories(3)
    path = tmp_path / "a.jsonl.gz"
    with gzip.open(path, "wt") as f:
        for t in trajs:
            f.write(t.to_json() + "\n")
    assert list(iter_records(str(path))) == trajs


WRITER = textwrap.dedent(
    """
    import sys, time
    from agentworld.io import atomic_write
    with atomic_write(sys.argv[1]) as f:
        f.write(b"x" * 1_000_000)
        print("writing", flush=True)
        time.sleep(60)
        f.write(b"never")
    """
)


def test_killed_writer_leaves_nothing_under_final_name(tmp_path):
    url = str(tmp_path / "out" / "part-0.jsonl")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert not exists(url)
    fs, path = get_fs(url.rsplit("/", 1)[0])
    leftovers = fs.ls(path) if fs.exists(path) else []
    # Local writes leave at most a hidden temp file, never the final name.
    assert all(p.rsplit("/", 1)[-1].startswith(".") for p in leftovers)
    # A finished write does appear.
    write_jsonl(url, [json.loads(sample_trajectories(1)[0].to_json())])
    assert exists(url)


UPLOADER = textwrap.dedent(
    """
    import sys
    from agentworld.io import atomic_write
    with atomic_write(sys.argv[1]) as f:
        for _ in range(int(sys.argv[2])):
            f.write(b"x" * (1 << 20))
    """
)


def test_writer_killed_during_its_s3_upload_leaves_nothing(s3_server, s3_bucket):
    """On S3 the object is uploaded after the block: the writer is killed while that
    upload is under way (a multipart upload is open on the server), and no object
    shows under the final name, neither then nor after."""
    import boto3

    url = s3_bucket + "/out/part-0.jsonl"
    bucket = s3_bucket.removeprefix("s3://")
    s3 = boto3.client("s3", endpoint_url=s3_server, region_name="us-west-2")
    # 160 MiB: several parts of s3fs's 50 MiB blocks, so the upload takes a while.
    proc = subprocess.Popen([sys.executable, "-c", UPLOADER, url, "160"])
    try:
        deadline = time.monotonic() + 120
        while not s3.list_multipart_uploads(Bucket=bucket).get("Uploads"):
            assert proc.poll() is None, "the upload finished before it could be caught"
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    get_fs(url)[0].invalidate_cache()
    assert not exists(url)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_a_short_process_that_reads_parquet_exits_cleanly(tmp_path):
    """A threaded pyarrow read through a Python file object can leave its thread pool to
    abort the process at exit (rc 134, "terminate called without an active exception":
    13 of 20 runs before read_parquet read without threads). A job or script that reads a
    shard and exits must exit 0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    url = str(tmp_path / "part-00000.parquet")
    pq.write_table(pa.table({"a": list(range(5000)), "b": [str(i) for i in range(5000)]}), url)
    script = f"from agentworld.io import read_parquet\nprint(read_parquet({url!r}).num_rows)\n"
    for _ in range(6):
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert (run.returncode, run.stdout.strip()) == (0, "5000"), run.stderr[-500:]
