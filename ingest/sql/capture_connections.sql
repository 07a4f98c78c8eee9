-- Capture $1's connections from the scanner's table _tv_conns.
INSERT INTO connections
SELECT $1, id, family, a_addr, a_port, b_addr, b_port, first_ns, last_ns,
       packets, a_isn, b_isn, handshake <> 0, closed <> 0, reset <> 0
FROM _tv_conns
