"""Rendering slurm.conf and gres.conf: pure functions, no daemons."""

from pathlib import Path

from jupyter_gtc.slurm.render import (
    NodeDecl, PartitionDecl, SlurmLayout, render_gres_conf, render_script_chain, render_slurm_conf,
)


def layout(**changes) -> SlurmLayout:
    root = Path("/data/gtc/clusters/demo")
    nodes = (
        NodeDecl("a3-0", "127.0.0.1", "vm", 7001, 26, 239616, 2, "h100", ("/g/a3-0/nvidia0", "/g/a3-0/nvidia1")),
        NodeDecl("cpu-0", "127.0.0.1", "vm", 7002, 8, 32768),
    )
    parts = (PartitionDecl("a3", ("a3-0",), default=True), PartitionDecl("all", ("a3-0", "cpu-0")))
    base = dict(cluster_name="demo", root=root, controller_host="vm", controller_addr="127.0.0.1",
                controller_port=7000, munge_socket=Path("/run/x/munge.socket"), nodes=nodes, partitions=parts)
    return SlurmLayout(**{**base, **changes})


def conf_lines(text: str) -> dict[str, str]:
    return {line.split("=", 1)[0]: line.split("=", 1)[1] for line in text.splitlines()
            if "=" in line and not line.startswith(("#", "NodeName", "PartitionName"))}


def test_controller_auth_and_paths():
    conf = conf_lines(render_slurm_conf(layout()))
    assert conf["ClusterName"] == "demo"
    assert conf["SlurmctldHost"] == "vm(127.0.0.1)" and conf["SlurmctldPort"] == "7000"
    assert conf["AuthInfo"].startswith("socket=/run/x/munge.socket")
    assert conf["StateSaveLocation"] == "/data/gtc/clusters/demo/state"
    assert conf["SlurmdSpoolDir"] == "/data/gtc/clusters/demo/spool/%n"
    assert conf["SlurmdParameters"] == "config_overrides"
    assert "Prolog" not in conf and "Epilog" not in conf


def test_node_and_partition_lines():
    text = render_slurm_conf(layout())
    assert ("NodeName=a3-0 NodeHostname=vm NodeAddr=127.0.0.1 Port=7001 CPUs=26 Boards=1 SocketsPerBoard=1 "
            "CoresPerSocket=26 ThreadsPerCore=1 RealMemory=239616 Gres=gpu:h100:2 State=UNKNOWN") in text
    cpu_line = next(line for line in text.splitlines() if line.startswith("NodeName=cpu-0"))
    assert "Gres" not in cpu_line and "Port=7002" in cpu_line
    assert "PartitionName=a3 Nodes=a3-0 Default=YES MaxTime=INFINITE State=UP" in text
    assert "PartitionName=all Nodes=a3-0,cpu-0 Default=NO MaxTime=INFINITE State=UP" in text


def test_prolog_and_epilog_point_at_the_chains():
    conf = conf_lines(render_slurm_conf(layout(has_prolog=True, has_epilog=True)))
    assert conf["Prolog"] == "/data/gtc/clusters/demo/etc/prolog.sh"
    assert conf["Epilog"] == "/data/gtc/clusters/demo/etc/epilog.sh"


def test_gres_conf_has_one_line_per_gpu_and_none_for_cpu_nodes():
    text = render_gres_conf(layout())
    assert text.splitlines()[1:] == [
        "AutoDetect=off",
        "NodeName=a3-0 Name=gpu Type=h100 File=/g/a3-0/nvidia0",
        "NodeName=a3-0 Name=gpu Type=h100 File=/g/a3-0/nvidia1",
    ]


def test_script_chain_quotes_paths_and_stops_at_the_first_failure():
    text = render_script_chain([Path("/etc/a.sh"), Path("/odd/it's here.sh")])
    assert "'/etc/a.sh' || exit $?" in text
    assert "'/odd/it'\\''s here.sh' || exit $?" in text
    assert text.startswith("#!/bin/bash\n") and text.rstrip().endswith("exit 0")


def test_scheduling_settings_are_global_lines_before_the_nodes():
    from jupyter_gtc.spec.cluster import Scheduling

    extra = Scheduling(priority_type="priority/multifactor", priority_weight_age=1000,
                       preempt_type="preempt/partition_prio", preempt_mode="requeue").slurm_conf()
    text = render_slurm_conf(layout(extra=extra))
    conf = conf_lines(text)
    assert conf["PriorityType"] == "priority/multifactor" and conf["PriorityWeightAge"] == "1000"
    assert conf["PreemptType"] == "preempt/partition_prio" and conf["PreemptMode"] == "REQUEUE"
    assert text.index("PreemptMode=") < text.index("NodeName=")


def test_accounting_sends_jobs_to_the_clusters_slurmdbd_signed_by_the_clusters_munged():
    from jupyter_gtc.slurm.render import AccountingLayout, accounting_slurm_conf, render_slurmdbd_conf

    acct = AccountingLayout(root=Path("/c"), dbd_host="vm", dbd_addr="10.0.0.1", dbd_port=6819, db_port=3307,
                            slurm_user="ada", munge_socket=Path("/c/munge/munge.socket"))
    conf = accounting_slurm_conf(acct)
    assert conf["AccountingStorageHost"] == "10.0.0.1" and conf["AccountingStoragePort"] == "6819"
    # With munge, "Pass" names the socket of the munged that signs messages to slurmdbd.
    assert conf["AccountingStoragePass"] == "/c/munge/munge.socket"
    dbd = dict(line.split("=", 1) for line in render_slurmdbd_conf(acct, "s3cret").splitlines()[1:])
    assert (dbd["DbdHost"], dbd["SlurmUser"], dbd["StorageHost"], dbd["StoragePort"], dbd["StoragePass"]) == (
        "vm", "ada", "127.0.0.1", "3307", "s3cret")
    assert dbd["AuthInfo"] == "socket=/c/munge/munge.socket"
