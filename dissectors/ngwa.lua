--------------------------------------------------------------------------------
-- ngwa.lua -- Wireshark/tshark dissector for the NGWA IPv4 option
--
-- SPDX-License-Identifier: GPL-2.0-only
-- Part of tcpvar; documented in docs/wireshark.md. For Wireshark 4.0 and later.
--
-- NGWA (New General Window Advertising, Talau & Wille) lets routers write the
-- free space of their queue into an IPv4 option; the receiver clamps the window
-- it advertises to it. The wire format tcpvar uses (its design notes, "NGWA"):
--
--      0        1        2        3        4        5
--   +--------+--------+--------+--------+--------+--------+
--   |  type  | length |     W_ngwa, 32-bit unsigned, bytes |
--   |   33   |   6    |       network byte order          |
--   +--------+--------+--------+--------+--------+--------+
--
--   type 33 = 0x21: copy 0, class 1, number 1 (161 = 0xA1 is the same option
--   with the copy bit set); W_ngwa = 0xFFFFFFFF means "no constraint yet";
--   any other length is malformed.
--
-- How it hooks in. Wireshark's IPv4 dissector hands every option it can delimit
-- to the dissector table "ip.option" (keyed on the whole type byte), with a
-- buffer that starts at the type byte and spans the option's length. This file
-- registers protocol `ngwa` there for the type and its copy-bit twin, so the
-- option is decoded in the "Options" subtree of every IPv4 header of a frame
-- (also the inner header of a tunnel), wherever it stands among the others.
-- Options the IPv4 dissector cannot delimit (length byte missing, length below
-- 2, or running past the options area) never reach the table; the companion
-- postdissector `ngwa_frame` walks the IPv4 headers of the frame to flag those
-- when they carry the NGWA type, and appends the frame's NGWA values to the
-- Info column.
--
-- Fields:   ngwa.type (.copy .class .number), ngwa.length, ngwa.window (uint32,
--           bytes), ngwa.unset (true for 0xFFFFFFFF)
-- Experts:  ngwa.length.bad, ngwa.overrun (Malformed, Error);
--           ngwa.cut (Malformed, Warning: the capture's snapshot length cut it)
-- Preference: ngwa.option_type (default 33), e.g. tshark -o ngwa.option_type:30
--
-- Use:  tshark -X lua_script:dissectors/ngwa.lua -r capture.pcap -Y ngwa \
--              -T fields -e frame.number -e ngwa.window -e ngwa.unset
--       or `tcpvar wireshark install` to load it in every Wireshark session.
--
-- The dissector checks every length before it reads; it never reads past what
-- was captured, so no input raises a Lua error.
--------------------------------------------------------------------------------

local NGWA_DEFAULT_TYPE = 33
local NGWA_LEN = 6
local NGWA_UNSET = 0xFFFFFFFF

local ngwa = Proto("ngwa", "NGWA Window Advertising")

-- every field of the protocol, flattened into ngwa.fields below
local hf = {
    type        = ProtoField.uint8("ngwa.type", "Type", base.DEC_HEX),
    type_copy   = ProtoField.bool("ngwa.type.copy", "Copy on fragmentation", 8,
                                  { "Yes", "No" }, 0x80),
    type_class  = ProtoField.uint8("ngwa.type.class", "Class", base.DEC, nil, 0x60),
    type_number = ProtoField.uint8("ngwa.type.number", "Number", base.DEC, nil, 0x1F),
    length      = ProtoField.uint8("ngwa.length", "Length", base.DEC),
    window      = ProtoField.uint32("ngwa.window", "Window", base.UNIT_STRING,
                                    { " byte", " bytes" },
                                    nil, "NGWA window W_ngwa in bytes"),
    unset       = ProtoField.bool("ngwa.unset", "No constraint yet", base.NONE, nil, nil,
                                  "The window is 0xFFFFFFFF: no router has set it yet"),
}

local pfields = {}
for _, field in pairs(hf) do
    pfields[#pfields + 1] = field
end
ngwa.fields = pfields

local ei = {
    bad_length = ProtoExpert.new("ngwa.length.bad", "NGWA option length is not 6",
                                 expert.group.MALFORMED, expert.severity.ERROR),
    overrun    = ProtoExpert.new("ngwa.overrun",
                                 "NGWA option runs past the end of the IPv4 options",
                                 expert.group.MALFORMED, expert.severity.ERROR),
    cut        = ProtoExpert.new("ngwa.cut",
                                 "NGWA option cut off by the capture's snapshot length",
                                 expert.group.MALFORMED, expert.severity.WARN),
}
ngwa.experts = { ei.bad_length, ei.overrun, ei.cut }

ngwa.prefs.option_type = Pref.uint("IPv4 option type", NGWA_DEFAULT_TYPE,
    "Type byte of the NGWA option (default 33 = 0x21). The same value with the copy "
    .. "bit set (+128) is decoded too; 0 and 1 (EOL, NOP) are not accepted.")

-- the option type in use, without the copy bit
local settings = { type = NGWA_DEFAULT_TYPE }

local function is_ngwa_type(t)
    return t % 128 == settings.type
end

--------------------------------------------------------------------------------
-- per-frame summary for the Info column, filled by the option dissector and by
-- the postdissector, written by the postdissector at the end of the frame
--------------------------------------------------------------------------------
local summary = { frame = -1, parts = {} }

local function note(pinfo, text)
    if summary.frame ~= pinfo.number then
        summary.frame = pinfo.number
        summary.parts = {}
    end
    summary.parts[#summary.parts + 1] = text
end

local function type_subtree(tree, range)
    local item = tree:add(hf.type, range)
    item:add(hf.type_copy, range)
    item:add(hf.type_class, range)
    item:add(hf.type_number, range)
    return item
end

--------------------------------------------------------------------------------
-- the option dissector, called through the "ip.option" table with a buffer that
-- starts at the type byte and spans the option's length
--------------------------------------------------------------------------------
function ngwa.dissector(tvb, pinfo, tree)
    local have = tvb:len()                 -- bytes captured
    local size = tvb:reported_len()        -- bytes on the wire (= the length byte)
    local opt = tree:add(ngwa, tvb:range(0, have))

    if have < 1 then
        opt:set_text("NGWA: nothing captured")
        opt:add_proto_expert_info(ei.cut)
        note(pinfo, "cut")
        return size
    end
    type_subtree(opt, tvb:range(0, 1))
    if have < 2 then
        opt:set_text("NGWA: length byte not captured")
        opt:add_proto_expert_info(ei.cut)
        note(pinfo, "cut")
        return size
    end
    local len_item = opt:add(hf.length, tvb:range(1, 1))
    local len = tvb:range(1, 1):uint()

    if len ~= NGWA_LEN then
        opt:set_text(string.format("NGWA (malformed: length %d, expected %d)", len, NGWA_LEN))
        len_item:add_proto_expert_info(ei.bad_length,
            string.format("NGWA option length is %d, expected %d", len, NGWA_LEN))
        note(pinfo, "malformed")
        return size
    end
    if have < NGWA_LEN then
        opt:set_text("NGWA: window not captured")
        opt:add_proto_expert_info(ei.cut)
        note(pinfo, "cut")
        return size
    end

    local wrange = tvb:range(2, 4)
    local window = wrange:uint()
    local unset = window == NGWA_UNSET
    local witem = opt:add(hf.window, wrange)
    opt:add(hf.unset, wrange, unset):set_generated()
    if unset then
        witem:append_text(" (no constraint yet)")
        opt:set_text("NGWA window: no constraint yet (0xffffffff)")
        note(pinfo, "unset")
    else
        opt:set_text(string.format("NGWA window: %d bytes", window))
        note(pinfo, string.format("%d", window))
    end
    return size
end

--------------------------------------------------------------------------------
-- the postdissector: NGWA options the IPv4 dissector could not delimit, and the
-- Info column
--------------------------------------------------------------------------------
local ngwa_frame = Proto("ngwa_frame", "NGWA per-frame checks")
local ip_field = Field.new("ip")

-- Walk the options of one IPv4 header (range @hdr, as captured) the way the
-- IPv4 dissector does; flag an NGWA option it stops at.
local function check_header(hdr, pinfo, tree)
    local have = hdr:len()
    if have < 20 then
        return
    end
    local b0 = hdr:range(0, 1):uint()
    if math.floor(b0 / 16) ~= 4 then
        return
    end
    local ihl = (b0 % 16) * 4
    local i = 20
    while i < ihl and i < have do
        local t = hdr:range(i, 1):uint()
        if t == 0 then                      -- end of option list
            return
        end
        if t == 1 then                      -- no operation
            i = i + 1
        else
            local problem, span
            if i + 1 >= ihl then
                problem, span = "length byte past the end of the options", 1
            elseif i + 1 >= have then
                return                      -- cut by the snapshot length: not ours to judge
            else
                local len = hdr:range(i + 1, 1):uint()
                if len < 2 then
                    problem, span = string.format("length %d is too short", len), 2
                elseif i + len > ihl then
                    problem = string.format("length %d runs past the end of the options "
                                            .. "(%d bytes left)", len, ihl - i)
                    span = ihl - i
                else
                    i = i + len             -- delimited: the option table had it
                end
            end
            if problem then
                if is_ngwa_type(t) then
                    span = math.min(span, have - i)
                    local opt = tree:add(ngwa, hdr:range(i, span))
                    opt:set_text("NGWA (malformed: " .. problem .. ")")
                    type_subtree(opt, hdr:range(i, 1))
                    if span >= 2 then
                        opt:add(hf.length, hdr:range(i + 1, 1))
                    end
                    opt:add_proto_expert_info(ei.overrun, "NGWA option " .. problem)
                    note(pinfo, "malformed")
                end
                return                      -- the IPv4 dissector stops here too
            end
        end
    end
end

function ngwa_frame.dissector(tvb, pinfo, tree)
    for _, fi in ipairs({ ip_field() }) do
        local ok, hdr = pcall(function() return fi.range end)
        if ok and hdr then
            check_header(hdr, pinfo, tree)
        end
    end
    if summary.frame == pinfo.number and #summary.parts > 0 then
        pinfo.cols.info:append(" [NGWA " .. table.concat(summary.parts, ", ") .. "]")
    end
    summary.frame = -1
    summary.parts = {}
end

register_postdissector(ngwa_frame)

--------------------------------------------------------------------------------
-- registration in "ip.option", following the preference
--------------------------------------------------------------------------------
local option_table = DissectorTable.get("ip.option")
local saved = {}          -- type byte -> the dissector it had before us (or false)
local registered = {}

local function unregister()
    for _, code in ipairs(registered) do
        option_table:remove(code, ngwa)
        if saved[code] then
            option_table:add(code, saved[code])
        end
    end
    registered = {}
end

local function register(base_type)
    unregister()
    settings.type = base_type
    for _, code in ipairs({ base_type, base_type + 128 }) do
        if saved[code] == nil then
            saved[code] = option_table:get_dissector(code) or false
        end
        option_table:add(code, ngwa)
        registered[#registered + 1] = code
    end
end

function ngwa.prefs_changed()
    local wanted = ngwa.prefs.option_type
    local base_type = wanted % 128
    if wanted > 255 or base_type < 2 then
        -- keep what is registered; say why once, where the user set it
        report_failure(string.format("NGWA: option type %d is not usable (it must be 2..255 "
                                     .. "and not EOL/NOP); keeping %d", wanted, settings.type))
        return
    end
    if base_type ~= settings.type or #registered == 0 then
        register(base_type)
    end
end

register(NGWA_DEFAULT_TYPE)
