"""Running the Spark job: in this process for a local master, through spark-submit for a
cluster; and the checks that say plainly what is missing (pyspark, Java 17+).

A local master (local, local[N], local[*]) runs the job on a SparkSession in this process:
one JVM, nothing to ship. Any other master (yarn, k8s://…, spark://…, local-cluster[…])
goes to spark-submit in client mode: the driver runs here (it reads the spec and the inputs'
listing from this machine and writes the manifests), the executors on the cluster. For a
cluster-mode driver, ship job.py and `tokenshape lake spec`'s file with spark-submit itself
(docs/lake.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

JOB = Path(__file__).with_name("job.py")
NEEDS = "install tokenshape[lake] (pip install 'tokenshape[lake]'); it needs Java 17+"
# A faster JVM start for short jobs: C1 only, class data sharing when the JDK has it.
FAST_JVM = "-XX:TieredStopAtLevel=1 -Xshare:auto"
_LOCAL = re.compile(r"^local(\[(\d+|\*)(,\d+)?\])?$")


class LakeUnavailable(RuntimeError):
    """pyspark or Java is missing: the message says what to install."""


def is_local(master: str) -> bool:
    """A master that runs in this process (local, local[N], local[*])."""
    return bool(_LOCAL.match(master))


def java_version() -> int | None:
    """The major version of the java on PATH (or JAVA_HOME), None without one."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        return None
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def spark_home() -> str:
    """pyspark's own folder as SPARK_HOME (bin/spark-submit, jars), unless one is set."""
    try:
        import pyspark
    except ImportError:
        raise LakeUnavailable(f"pyspark is not installed: {NEEDS}") from None
    return os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)


def check_runtime() -> None:
    """Raise LakeUnavailable naming what is missing."""
    spark_home()
    major = java_version()
    if major is None:
        raise LakeUnavailable(f"no Java runtime found (java on PATH or JAVA_HOME): {NEEDS}")
    if major < 17:
        raise LakeUnavailable(f"Java {major} found, Spark 4 needs Java 17 or newer: {NEEDS}")


def session(master: str, conf: dict[str, str] | None = None, app_name: str = "tokenshape-lake"):
    """A SparkSession on a local master, bound to loopback, with a fast-starting JVM."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", FAST_JVM)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def run_local(
    spec: dict,
    master: str,
    conf: dict[str, str],
    **options,
) -> dict:
    """Run the job on a session in this process; returns its summary."""
    from app.lake import job

    spark = session(master, conf)
    try:
        return job.run(spark, spec, **options)
    finally:
        spark.stop()


def _private_home(home: Path, where: Path) -> str:
    """A SPARK_HOME of links to `home`'s folders, with a `work` folder of its own."""
    where.mkdir()
    for entry in home.iterdir():
        if entry.name != "work":
            (where / entry.name).symlink_to(entry)
    return str(where)


def submit_command(
    spec_path: Path,
    master: str,
    conf: dict[str, str],
    *,
    inputs: Sequence[str],
    output: str,
    fmt: str,
    start: str | None,
    end: str | None,
    tiers: Sequence[str],
    tz: str,
    received_at: datetime | None,
) -> list[str]:
    """The spark-submit command line that runs job.py (client mode) with these options."""
    cmd = [str(Path(spark_home()) / "bin" / "spark-submit"), "--master", master]
    merged = {"spark.ui.enabled": "false", "spark.log.level": "WARN"}
    if master.startswith("local-cluster"):  # short-lived JVMs on this machine: start fast
        merged |= {"spark.driver.extraJavaOptions": FAST_JVM}
        merged |= {"spark.executor.extraJavaOptions": FAST_JVM}
    merged |= conf
    for key, value in merged.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(JOB), "--spec", str(spec_path), "--output", output, "--format", fmt]
    for path in inputs:
        cmd += ["--input", path]
    cmd += ["--tiers", ",".join(tiers), "--tz", tz]
    if start:
        cmd += ["--from", start]
    if end:
        cmd += ["--to", end]
    if received_at:
        cmd += ["--received-at", received_at.isoformat()]
    return cmd


def run_submit(spec: dict, master: str, conf: dict[str, str], **options) -> dict:
    """Run job.py through spark-submit; its log goes to stderr; returns its summary."""
    from app.lake.spec import write

    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)  # never used by the job: no Python UDFs
    with tempfile.TemporaryDirectory(prefix="tokenshape-lake-") as tmp:
        home = spark_home()
        if master.startswith("local-cluster"):
            # Its workers keep each executor's folder under SPARK_HOME/work, which here is
            # pyspark's package folder: give them a SPARK_HOME of their own, thrown away after.
            home = _private_home(Path(home), Path(tmp) / "spark-home")
        env["SPARK_HOME"] = home
        spec_path = write(spec, Path(tmp) / "spec.json")
        cmd = submit_command(spec_path, master, conf, **options)
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
    summary = None
    for line in proc.stdout.splitlines():
        if line.startswith("tokenshape-lake-summary: "):
            summary = json.loads(line.split(": ", 1)[1])
        else:
            print(line)
    if proc.returncode or summary is None:
        raise RuntimeError(f"spark-submit failed (exit {proc.returncode}); its log is above")
    return summary
