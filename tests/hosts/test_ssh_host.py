"""What SSH adds to the host contract, against a real sshd: one connection for every
command, host keys checked (unknown and changed keys refused, saying how to accept one), a
dropped connection replaced by itself, and the job's files read over it."""

from __future__ import annotations

import signal
import time

import psutil
import pytest

from jupyter_gtc.exceptions import CommandError, HostKeyRefused, HostUnreachable
from jupyter_gtc.hosts.ssh import SSHHost
from jupyter_gtc.metrics.reader import MetricsReader
from jupyter_gtc.services.logs import LogFollower


def test_one_connection_carries_every_command_and_file_read(sshd, ssh_host, tmp_path):
    before = sshd.logins()
    for i in range(10):
        assert ssh_host.run(["echo", str(i)]).stdout == f"{i}\n"
        ssh_host.stat(tmp_path)
    assert sshd.logins() - before == 1


def test_a_remote_failure_is_the_commands_own(ssh_host):
    with pytest.raises(CommandError) as failed:
        ssh_host.run(["sh", "-c", "echo 'no such partition' >&2; exit 1"])
    assert failed.value.argv[0] == "sh" and failed.value.returncode == 1
    assert "no such partition" in str(failed.value) and not isinstance(failed.value, HostUnreachable)


def test_an_unknown_host_key_is_refused_and_the_error_says_how_to_accept_it(sshd, tmp_path, control_dir):
    config = tmp_path / "config"
    config.write_text(sshd.config.read_text().replace(str(sshd.known_hosts), str(tmp_path / "empty_known_hosts")))
    host = SSHHost(sshd.alias, config_file=config, control_dir=control_dir)
    with pytest.raises(HostKeyRefused) as refused:
        host.run(["touch", str(tmp_path / "ran")])
    assert "not in your known_hosts" in str(refused.value) and f"ssh {sshd.alias}" in str(refused.value)
    assert not (tmp_path / "ran").exists()


def test_a_changed_host_key_is_refused(sshd, tmp_path, control_dir):
    other = "AAAAC3NzaC1lZDI1NTE5AAAAIBfr6sgZgvB/3YAq7A8Dmgsx5QwH2Xbl6Dq0RQiD0ZtT"  # some other ed25519 key
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 {other}\n")
    config = tmp_path / "config"
    config.write_text(sshd.config.read_text().replace(str(sshd.known_hosts), str(known)))
    host = SSHHost(sshd.alias, config_file=config, control_dir=control_dir)
    with pytest.raises(HostKeyRefused) as refused:
        host.run(["true"])
    assert "not the one your known_hosts holds" in str(refused.value) and "ssh-keygen -R" in str(refused.value)


def test_a_host_that_does_not_answer_is_unreachable_not_a_crash(control_dir):
    from jupyter_gtc._ports import free_ports

    host = SSHHost("127.0.0.1", port=free_ports(1)[0], control_dir=control_dir, connect_timeout=5)
    with pytest.raises(HostUnreachable) as unreachable:
        host.run(["true"])
    assert "cannot reach 127.0.0.1 over SSH" in str(unreachable.value)


def test_a_dropped_connection_is_replaced_by_the_next_command(sshd, ssh_host, tmp_path):
    assert ssh_host.run(["echo", "before"]).stdout == "before\n"
    assert ssh_host.stat(tmp_path).is_dir  # the file server runs over the connection too
    before = sshd.logins()
    # Kill the server side of the shared connection, as a network drop or a login node's
    # reboot would end it: every sshd process serving it.
    for child in psutil.Process(sshd.process.pid).children(recursive=True):
        child.send_signal(signal.SIGKILL)
    assert ssh_host.stat(tmp_path).is_dir
    assert ssh_host.run(["echo", "after"]).stdout == "after\n"
    assert sshd.logins() - before == 1


def test_a_command_cut_off_by_a_drop_fails_saying_it_may_have_run_and_is_not_sent_again(sshd, ssh_host, tmp_path):
    import threading

    started = tmp_path / "started"
    runs = tmp_path / "runs"
    outcome = {}

    def submit():
        try:
            ssh_host.run(["sh", "-c", f'echo x >> "{runs}"; touch "{started}"; sleep 30'])
        except HostUnreachable as e:
            outcome["error"] = e

    worker = threading.Thread(target=submit)
    worker.start()
    while not started.exists():
        time.sleep(0.05)
    for child in psutil.Process(sshd.process.pid).children(recursive=True):
        child.send_signal(signal.SIGKILL)
    worker.join(60)
    assert "may have run" in str(outcome["error"]), outcome
    assert runs.read_text() == "x\n"  # once: not sent again over the new connection
    assert ssh_host.run(["echo", "next"]).stdout == "next\n"


def test_a_command_gets_its_input_and_its_timeout(ssh_host):
    assert ssh_host.run(["cat"], input="line one\nü\n").stdout == "line one\nü\n"
    with pytest.raises(CommandError) as late:
        ssh_host.run(["sleep", "10"], timeout=1)
    assert late.value.timeout == 1 and "timed out" in str(late.value)
    assert ssh_host.run(["no-such-program-here"], check=False).returncode == 127


def test_a_log_and_metrics_are_followed_over_ssh(ssh_host, tmp_path):
    from tensorboardX import SummaryWriter

    log = tmp_path / "job dir" / "slurm-7.out"
    log.parent.mkdir()
    log.write_text("step 1\n")
    follower = LogFollower(log, host=ssh_host)
    assert follower.read_new() == "step 1\n"
    with open(log, "a") as f:
        f.write("step 2 ü\n")
    assert follower.read_new() == "step 2 ü\n"
    with SummaryWriter(str(tmp_path / "job dir" / "logs")) as writer:
        for step in range(3):
            writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    scalars = MetricsReader(tmp_path / "job dir" / "logs", host=ssh_host).read_new()
    assert [(s.tag, s.step) for s in scalars] == [("train/loss", 0), ("train/loss", 1), ("train/loss", 2)]


def test_many_reads_share_one_round_trip_per_batch_and_survive_a_drop(sshd, ssh_host, tmp_path):
    from jupyter_gtc.hosts.ssh import READ_BATCH

    files = [tmp_path / f"log-{i}" for i in range(READ_BATCH + 6)]
    for i, path in enumerate(files):
        path.write_text(f"{i}\n")
    rounds = []
    pipelined = ssh_host._pipelined_reads
    ssh_host._pipelined_reads = lambda chunk, owner=None: rounds.append(len(chunk)) or pipelined(chunk, owner)
    assert ssh_host.read_many([(p, 0, -1) for p in files]) == [p.read_bytes() for p in files]
    assert rounds == [READ_BATCH, 6]
    ssh_host._stop_server()  # as a dropped connection does: the next call opens a new one
    assert ssh_host.read_many([(files[0], 0, -1)]) == [b"0\n"]


def test_a_file_read_in_pieces_asks_for_the_next_piece_ahead_and_the_answers_stay_in_step(ssh_host, tmp_path):
    """Each whole piece read asks for the next one at once (it crosses the connection while
    the caller decodes this one). A piece asked for and never taken, other requests between,
    a seek elsewhere, a file that grows meanwhile, a dropped connection: every answer still
    goes to its own request."""
    import os

    from jupyter_gtc.hosts.base import READ_AHEAD_MIN

    piece = READ_AHEAD_MIN
    data = os.urandom(4 * piece + 123)
    path = tmp_path / "events"
    path.write_bytes(data)
    with ssh_host.open_read(path) as f:
        assert f.read(piece) == data[:piece]
        assert len(ssh_host._owed) == 1                   # the second piece, asked for already
        assert ssh_host.stat(path).size == len(data)      # its answer came first, and was kept
        assert f.read(piece) == data[piece:2 * piece]
        with open(path, "ab") as grown:
            grown.write(b"more")
        f.seek(3 * piece)                                 # the third piece is never taken
        assert f.read(piece) == data[3 * piece:4 * piece]
        assert f.read(piece) == data[4 * piece:] + b"more"
        assert f.read(piece) == b""
    assert ssh_host.read(path, 0, 10) == data[:10]
    with ssh_host.open_read(path) as f:
        assert f.read(piece) == data[:piece]
        ssh_host._stop_server()                           # as a dropped connection does
        assert f.read(piece) == data[piece:2 * piece]     # asked again over a new one
    assert ssh_host.read(path, 5, 5) == data[5:10]        # past the third piece, never taken
    assert not ssh_host._owed
