"""Machines for real: three daemons in network namespaces, each with its own IP, listening on
0.0.0.0:7420 as README.md's multi-machine section and docs/deploy.md set them up (the first
without seeds, the others seeded with it), with the shipped defaults."""

from __future__ import annotations

import re

from tests.testbed.conftest import MakeTestbed
from tests.testbed.runs import answers, submit


def test_machines_on_every_interface_advertise_their_own_address_and_dial_nothing_wrong(
    module_testbed: MakeTestbed,
) -> None:
    bed = module_testbed(3, peers=2)
    bed.wait_one_system(30)
    status = bed.satind("status", "--json", to="m2")
    assert status.returncode == 0, status.stderr
    for machine in bed.machines.values():
        text = machine.log_text()
        # The address of the interface that reaches the seeds (the first: its only one).
        assert f"gives the members {machine.ip} (" in text, text
        # Nobody dialled an address that answered under another name (0.0.0.0 was each
        # machine's own), and nobody failed a dial: m1 was up before the others started.
        assert not re.search(r"cannot connect|but .* answered", text), text
    # Runs submitted to each machine are exact.
    runs = [submit(bed, m, "nqueens", "10") for m in bed.machines]
    assert [r["result"] for r in answers(runs, 120)] == [724, 724, 724]


def test_the_readme_commands_work_on_the_testbed(module_testbed: MakeTestbed) -> None:
    """README.md's "On several machines", as written, against machines of their own."""
    bed = module_testbed(3, peers=2)
    for args in (
        ("status",),
        ("runs", "--since", "1d"),
        ("plugins",),
        ("ready", "--peers", "2", "--members", "6"),
    ):
        done = bed.satind(*args, to="m3")
        assert done.returncode == 0, (args, done.stderr)
    submitted = bed.satind("submit", "fib", "25", "12", to="m1")
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.split()[-1]
    done = bed.satind("result", run_id, "--wait", to="m3")
    assert done.returncode == 0 and "75025" in done.stdout, (done.stdout, done.stderr)
