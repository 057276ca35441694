"""The process limit for root without a writable pids cgroup: a pid namespace with a limit.

RLIMIT_NPROC never applies to uid 0, and a pids cgroup needs a writable, delegated hierarchy
(CI containers often have neither). Since Linux 6.14 ``kernel.pid_max`` belongs to each pid
namespace, and bwrap gives every run its own: a short setup step inside the sandbox, the only
code that ever holds capabilities there, sets the namespace's ``pid_max`` to 300 + the limit,
moves ``ns_last_pid`` to 299 so that every new process takes a number from 300 up (the kernel's
reserved range ends at 300, so numbers cycle inside [300, pid_max)), makes ``/proc/sys``
read-only, drops every capability (bounding set included) and only then runs the command. A
fork past the limit fails with EAGAIN, as it does under a cgroup.

On an older kernel ``pid_max`` is global, and writing it would change the host's: this mode is
then never used (:func:`pid_namespace_limit_available` checks the kernel version before it
probes anything).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess

log = logging.getLogger(__name__)

#: The kernel keeps pid numbers below this for the system after a wrap (RESERVED_PIDS).
RESERVED_PIDS = 300
#: The first kernel whose pid_max is per pid namespace.
MIN_KERNEL = (6, 14)
#: What the setup step prints before giving up (the runner turns it into a SandboxError).
SETUP_FAILED = "autopilot-sandbox: cannot set the process limit"
#: Options that keep the two capabilities the setup step needs (it drops them itself).
CAP_ARGS = ["--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]

_SCRIPT = (
    '{ echo "$1" > /proc/sys/kernel/pid_max'
    f" && echo {RESERVED_PIDS - 1} > /proc/sys/kernel/ns_last_pid"
    ' && "$2" -o remount,bind,ro /proc/sys; } 2>/dev/null'
    f' || {{ echo "{SETUP_FAILED}" >&2; exit 125; }}\n'
    'setpriv="$3"; shift 3\n'
    'exec "$setpriv" --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- "$@"\n'
)


def kernel_version(release: str | None = None) -> tuple[int, int]:
    """(major, minor) of the running kernel (or of `release`), (0, 0) when unreadable."""
    m = re.match(r"(\d+)\.(\d+)", release if release is not None else os.uname().release)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def pid_max_for(max_processes: int) -> int:
    """The namespace's pid_max that leaves exactly `max_processes` pid numbers."""
    return RESERVED_PIDS + max(1, max_processes)


def wrap(argv: list[str], max_processes: int) -> list[str]:
    """`argv` behind the setup step (run inside bwrap, with :data:`CAP_ARGS`)."""
    mount = shutil.which("mount", path="/usr/bin:/bin") or "/usr/bin/mount"
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin") or "/usr/bin/setpriv"
    limit = str(pid_max_for(max_processes))
    return ["/bin/sh", "-c", _SCRIPT, "autopilot-setup", limit, mount, setpriv, *argv]


@functools.cache
def pid_namespace_limit_available(bwrap: str) -> tuple[bool, str]:
    """Whether the pid-namespace limit works here, and if not the missing feature, in words.

    Never probes on a kernel older than 6.14 (there the write would reach the host's pid_max).
    """
    if kernel_version() < MIN_KERNEL:
        return False, (
            f"Linux {MIN_KERNEL[0]}.{MIN_KERNEL[1]} or later (per-pid-namespace pid_max); "
            f"this kernel is {os.uname().release}"
        )
    if shutil.which("setpriv") is None:
        return False, "setpriv (util-linux)"
    probe = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        *CAP_ARGS,
        "--ro-bind",
        "/usr",
        "/usr",
        *_links(),
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        "/proc/sys",
        "/proc/sys",
        *wrap(["/bin/sh", "-c", "cat /proc/sys/kernel/pid_max; grep CapEff /proc/self/status"], 8),
    ]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"a working pid-namespace limit ({exc})"
    lines = done.stdout.split()
    expected = [str(pid_max_for(8)), "CapEff:", "0000000000000000"]
    if done.returncode != 0 or lines != expected:
        detail = (done.stderr.strip().splitlines() or ["unexpected output"])[-1]
        return False, f"a working pid-namespace limit ({detail})"
    log.debug("process limit through the sandbox's pid namespace (pid_max) available")
    return True, ""


def _links() -> list[str]:
    """/bin, /lib, ... as on the host, so /bin/sh and the loader resolve in the probe."""
    args: list[str] = []
    for tree in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(tree):
            args += ["--symlink", os.readlink(tree), tree]
        elif os.path.isdir(tree):
            args += ["--ro-bind", tree, tree]
    return args
