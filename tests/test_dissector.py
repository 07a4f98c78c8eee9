"""The Wireshark dissector dissectors/ngwa.lua, run in the real tshark with
`-X lua_script:` (as Wireshark's own test/suite_wslua.py does): per-frame
values against the crafted ground truth, display filters, expert info for
malformed options, the option-type preference, no Lua error on any input,
agreement with what `tcpvar analyze` stores, and `tcpvar wireshark install`."""
from __future__ import annotations

import json
import os
import random
import struct
import subprocess

import pytest

from conftest import FIXTURES, ROOT, tcpvar_process

LUA = ROOT / "dissectors" / "ngwa.lua"
EXPECTED = json.loads((FIXTURES / "crafted_expected.json").read_text())["files"]
NGWA_FILES = ["ngwa_options.pcap", "ngwa_flows.pcap"]
UNSET = 0xFFFFFFFF
MALFORMED = "117440512"         # _ws.expert.group of PI_MALFORMED (0x07000000)


def tshark(path, *args, script=True, env=None, check=True):
    cmd = ["tshark", "-n"]
    if script:
        cmd += ["-X", f"lua_script:{LUA}"]
    cmd += ["-r", str(path), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if check:
        assert res.returncode == 0, res.stderr
        assert "Lua: Error" not in res.stderr and "lua_script" not in res.stderr, res.stderr
    return res


def fields(path, *names, extra=()):
    """{frame: [values of each field, each a list]} from tshark -T fields."""
    args = [*extra, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|",
            "-e", "frame.number"]
    for name in names:
        args += ["-e", name]
    out = {}
    for line in tshark(path, *args).stdout.splitlines():
        cols = line.split("\t")
        out[int(cols[0])] = [c.split("|") if c else [] for c in cols[1:]]
    return out


def filtered(path, expression, extra=()):
    res = tshark(path, *extra, "-Y", expression, "-T", "fields", "-e", "frame.number")
    return [int(x) for x in res.stdout.split()]


def _truth(name):
    return EXPECTED[name]["frame_table"]


def _want(ngwa):
    """(windows, unset flags, malformed) tshark should give for one frame."""
    state = ngwa["state"]
    if "values" in ngwa:
        values = ngwa["values"]
    elif state in ("valid", "unset"):
        values = [ngwa["value"]]
    else:
        values = []
    return values, [v == UNSET for v in values], state == "malformed"


def _bool(text):
    return {"1": True, "0": False, "True": True, "False": False}[text]


@pytest.mark.parametrize("name", NGWA_FILES)
def test_every_frame_decodes_as_built(name):
    got = fields(FIXTURES / name, "ngwa.window", "ngwa.unset", "_ws.expert.group",
                 "_ws.lua.error")
    table = _truth(name)
    assert sorted(got) == [f["frame"] for f in table]
    problems = []
    for f in table:
        windows, unset, groups, lua_errors = got[f["frame"]]
        want_values, want_unset, want_malformed = _want(f["ngwa"])
        have = ([int(v) for v in windows], [_bool(u) for u in unset], MALFORMED in groups)
        if have != (want_values, want_unset, want_malformed) or lua_errors:
            problems.append(f"frame {f['frame']} ({f['ngwa'].get('case', 'no option')}): "
                            f"tshark {have}, built {want_values, want_unset, want_malformed}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", NGWA_FILES)
def test_display_filters_select_the_right_frames(name):
    path, table = FIXTURES / name, _truth(name)

    def frames(pred):
        return [f["frame"] for f in table if pred(*_want(f["ngwa"]))]

    assert filtered(path, "ngwa.window < 50000") == frames(
        lambda v, u, m: any(x < 50000 for x in v))
    # a boolean field is there for every window: test its value, not its presence
    assert filtered(path, "ngwa.unset == 1") == frames(lambda v, u, m: any(u))
    assert filtered(path, "ngwa.unset == 0") == frames(lambda v, u, m: not all(u))
    assert filtered(path, "ngwa.length.bad || ngwa.overrun") == frames(lambda v, u, m: m)
    assert filtered(path, "ngwa") == frames(lambda v, u, m: bool(v) or m)
    assert filtered(path, "_ws.lua.error") == []


def test_malformed_options_are_expert_errors():
    """Wrong lengths that fit are flagged by the option dissector; options the
    IPv4 dissector cannot delimit (length 0 or 1, no length byte, running past
    the options area) by the postdissector. Both are Error/Malformed."""
    path = FIXTURES / "ngwa_flows.pcap"
    text = tshark(path, "-V", "-Y", "ngwa.length.bad || ngwa.overrun").stdout
    assert "Lua Error" not in text
    for message in ("NGWA option length is 5, expected 6",
                    "NGWA option length 0 is too short",
                    "NGWA option length 1 is too short",
                    "NGWA option length byte past the end of the options"):
        assert f"[Expert Info (Error/Malformed): {message}" in text, message
    text = tshark(FIXTURES / "ngwa_options.pcap", "-V", "-Y", "ngwa.overrun").stdout
    assert ("[Expert Info (Error/Malformed): NGWA option length 6 runs past the end of the "
            "options (4 bytes left)]") in text
    # the well-formed ones raise nothing
    quiet = tshark(path, "-V", "-Y", "ngwa.window").stdout
    assert "Error/Malformed" not in quiet


def test_info_column_and_tree():
    out = fields(FIXTURES / "ngwa_flows.pcap", "_ws.col.Info")
    info = {frame: cols[0][0] if cols[0] else "" for frame, cols in out.items()}
    assert info[17].endswith("[NGWA 60000]")
    assert info[16].endswith("[NGWA unset]")
    assert info[32].endswith("[NGWA malformed]")
    assert info[74].endswith("[NGWA 40000, 20000]")          # IP-in-IP: both headers
    assert "NGWA" not in info[3]                               # IPv6
    tree = tshark(FIXTURES / "ngwa_options.pcap", "-V", "-Y", "frame.number == 14").stdout
    # Record Route first, then NGWA, inside the IPv4 options subtree
    options = tree[tree.index("Options: (16 bytes)"):tree.index("Transmission Control")]
    assert options.index("Record Route") < options.index("NGWA window: 123456 bytes")
    assert "Window: 123456 bytes" in options and "[No constraint yet: False]" in options


def test_option_type_preference():
    path, table = FIXTURES / "ngwa_flows.pcap", _truth("ngwa_flows.pcap")
    got = fields(path, "ngwa.window", extra=("-o", "ngwa.option_type:34"))
    for f in table:
        alt = f.get("ngwa_type34", {"state": "absent"})
        assert [int(v) for v in got[f["frame"]][0]] == _want(alt)[0], f["frame"]
    # the copy bit does not matter: 161 is the same option as 33
    assert fields(path, "ngwa.window", extra=("-o", "ngwa.option_type:161")) == \
        fields(path, "ngwa.window")
    # EOL and NOP cannot be taken: said on stderr, the default stays
    res = tshark(path, "-o", "ngwa.option_type:1", "-T", "fields", "-e", "ngwa.window",
                 check=False)
    assert res.returncode == 0
    assert "option type 1 is not usable" in res.stderr
    assert res.stdout == tshark(path, "-T", "fields", "-e", "ngwa.window").stdout


def _first_ngwa(types, lengths, windows):
    """tcpvar's rule: the first NGWA option of the header counts, if well formed."""
    if not types or not lengths or int(lengths[0]) != 6 or not windows:
        return None
    return int(windows[0])


@pytest.mark.parametrize("name", NGWA_FILES)
def test_tcpvar_stores_what_tshark_shows(name, analyzed, store):
    doc = analyzed(FIXTURES / name)
    ours = dict(store.con.execute("SELECT frame, ngwa_window FROM packets WHERE capture_id = $1",
                                  [doc["capture_id"]]).fetchall())
    theirs = fields(FIXTURES / name, "ngwa.type", "ngwa.length", "ngwa.window")
    assert ours, "no packets stored"
    for frame, value in ours.items():
        assert value == _first_ngwa(*theirs[frame]), f"frame {frame}"
    # what tcpvar does not store is not TCP it could read (the tunnel, the cut frame)
    for f in _truth(name):
        if f["frame"] not in ours:
            assert not f.get("tcp", True), f["frame"]


def test_ngwa_windows_view(analyzed, store):
    """The view lists every packet with a well-formed option, with the window
    the other direction advertised last before it."""
    name = "ngwa_flows.pcap"
    doc = analyzed(FIXTURES / name)
    rows = store.con.execute(
        "SELECT frame, conn, dir, win, ngwa_window, ngwa_unset, peer_win FROM ngwa_windows "
        "WHERE capture_id = $1 ORDER BY frame", [doc["capture_id"]]).fetchall()
    want = {f["frame"]: f["ngwa"]["value"] for f in _truth(name)
            if f.get("tcp", True) and f["ngwa"]["state"] in ("valid", "unset")}
    assert {r[0]: r[4] for r in rows} == want
    assert all(r[5] == (r[4] == UNSET) for r in rows)
    packets = store.con.execute(
        "SELECT frame, conn, dir, win FROM packets WHERE capture_id = $1 AND flags & 18 <> 0 "
        "ORDER BY frame", [doc["capture_id"]]).fetchall()
    for frame, conn, direction, _, _, _, peer_win in rows:
        before = [w for (fr, c, d, w) in packets if c == conn and d != direction and fr < frame]
        assert peer_win == (before[-1] if before else None), frame
    # conn 1: the receiver's ACKs (NGWA unset) advertise the NGWA values its data carried
    data = [r[4] for r in rows if r[1] == 1 and r[2] == 0 and not r[5]]
    acks = [r[3] for r in rows if r[1] == 1 and r[2] == 1 and r[5]][1:-1]   # not SYN/ACK, FIN
    assert data == acks == [60000, 48000, 36000, 24000, 16000, 16000, 24000, 40000]


# ---------------------------------------------------------------------------
# random option areas: never a Lua error, and tcpvar agrees with tshark
# ---------------------------------------------------------------------------

def _checksum(hdr: bytes) -> bytes:
    s = sum(struct.unpack(f"!{len(hdr) // 2}H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return hdr[:10] + struct.pack("!H", ~s & 0xFFFF) + hdr[12:]


def _ipv4(opts: bytes, payload: bytes, proto: int, ident: int, ihl: int | None = None) -> bytes:
    ihl = ihl if ihl is not None else 5 + len(opts) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(opts) + len(payload), ident,
                      0x4000, 64, proto, 0, bytes([198, 18, 10, 1]), bytes([198, 18, 20, 2]))
    return _checksum(hdr + opts) + payload


def _random_options(rnd: random.Random) -> bytes:
    out = b""
    size = rnd.choice([4, 8, 12, 20, 40])
    while len(out) < size:
        kind = rnd.random()
        if kind < 0.4:
            t = rnd.choice([0x21, 0xA1])
            n = rnd.choice([6] * 8 + [0, 1, 2, 5, 7, 40, 255])
            out += bytes([t, n]) + rnd.randbytes(4)
        elif kind < 0.5:
            out += b"\x01"
        elif kind < 0.55:
            out += b"\x00"
        elif kind < 0.7:
            out += bytes([7, 7, 4, 0, 0, 0, 0])
        else:
            out += bytes([rnd.randrange(256), rnd.randrange(256)]) + rnd.randbytes(rnd.randrange(5))
    return out[:size]


def _random_capture(path, count=400, seed=20251121):
    rnd = random.Random(seed)
    records, seq = [], 1000
    for i in range(count):
        opts = _random_options(rnd)
        tcp = struct.pack("!HHIIBBHHH", 40000, 5201, seq, 1, 0x50, 0x18, 64240, 0, 0) + b"x" * 10
        seq += 10
        pkt = _ipv4(opts, tcp, 6, i)
        caplen = len(pkt)
        if i % 5 == 4:                       # a tunnel, random options in both headers
            pkt = _ipv4(_random_options(rnd), pkt, 4, i)
            caplen = len(pkt)
        elif i % 7 == 6:                     # cut inside the header
            caplen = rnd.randrange(20, 20 + len(opts) + 1)
        elif i % 11 == 10:                   # IHL larger than the header really is
            pkt = _ipv4(opts, tcp, 6, i, ihl=min(15, 5 + len(opts) // 4 + 2))
        records.append(struct.pack("<IIII", 1_700_000_000 + i, 0, caplen, len(pkt)) + pkt[:caplen])
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101)   # raw IPv4
    path.write_bytes(header + b"".join(records))
    return path


def test_random_options_never_raise_a_lua_error(tmp_path):
    path = _random_capture(tmp_path / "random.pcap")
    res = tshark(path, "-V")
    assert "Lua Error" not in res.stdout
    assert filtered(path, "_ws.lua.error") == []
    # every preference value, every frame
    res = tshark(path, "-o", "ngwa.option_type:7", "-V")
    assert "Lua Error" not in res.stdout


def test_random_options_tcpvar_agrees_with_tshark(tmp_path, analyzed, store):
    path = _random_capture(tmp_path / "random.pcap")
    doc = analyzed(path)
    ours = dict(store.con.execute("SELECT frame, ngwa_window FROM packets WHERE capture_id = $1",
                                  [doc["capture_id"]]).fetchall())
    theirs = fields(path, "ngwa.type", "ngwa.length", "ngwa.window")
    counts = {"decoded": 0, "malformed": 0, "absent": 0}
    for frame, value in ours.items():
        assert value == _first_ngwa(*theirs[frame]), f"frame {frame}: {theirs[frame]}"
        kind = "decoded" if value is not None else "malformed" if theirs[frame][0] else "absent"
        counts[kind] += 1
    assert min(counts.values()) >= 30, counts


# ---------------------------------------------------------------------------
# tcpvar wireshark install
# ---------------------------------------------------------------------------

tcpvar = tcpvar_process

def test_install_into_a_folder(tmp_path):
    target = tmp_path / "plugins" / "new"
    res = tcpvar("wireshark", "install", "--dir", target)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"installed: {target / 'ngwa.lua'}"
    assert (target / "ngwa.lua").read_bytes() == LUA.read_bytes()
    assert "-X lua_script:" in res.stderr          # not a folder Wireshark reads by itself
    again = tcpvar("wireshark", "install", "--dir", target)
    assert again.returncode == 0 and again.stdout.startswith("already installed: ")
    (target / "ngwa.lua").write_text("-- an older version\n")
    assert tcpvar("wireshark", "install", "--dir", target).stdout.startswith("installed: ")
    assert (target / "ngwa.lua").read_bytes() == LUA.read_bytes()
    assert [p.name for p in target.iterdir()] == ["ngwa.lua"]


def test_installed_plugin_is_loaded_by_tshark(tmp_path):
    """Without --dir it goes to the personal Lua plugin folder tshark reports,
    and a tshark started afterwards decodes NGWA without -X."""
    env = {**os.environ, "HOME": str(tmp_path)}
    res = tcpvar("wireshark", "install", env=env)
    assert res.returncode == 0, res.stderr
    plugin = tmp_path / ".local" / "lib" / "wireshark" / "plugins" / "ngwa.lua"
    assert res.stdout.strip() == f"installed: {plugin}"
    assert "warning" not in res.stderr
    assert tshark(FIXTURES / "ngwa_options.pcap", "-Y", "ngwa.unset == 1", "-T", "fields",
                  "-e", "frame.number", script=False, env=env).stdout.split() == ["10"]


def test_install_errors_are_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = tcpvar("wireshark", "install", "--dir", blocker / "sub")
    assert res.returncode == 6
    assert res.stderr.strip().count("\n") == 0 and "cannot install ngwa.lua" in res.stderr
    res = tcpvar("wireshark", "install", "--dir", blocker)
    assert res.returncode == 2 and "is a file" in res.stderr


def test_install_is_documented():
    from tcpvar.cli.main import cli

    text = (ROOT / "docs" / "analyze.md").read_text()
    group = cli.get_command(None, "wireshark")
    for command in (group, group.commands["install"]):
        assert "Examples" in command.help
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and opt != "--help":
                    assert f"`{opt}" in text, opt
    assert "tcpvar wireshark install" in (ROOT / "README.md").read_text()
