// SPDX-License-Identifier: GPL-2.0-only
/*
 * decode.c - link layer -> IPv4/IPv6 -> TCP header and options.
 *
 * Every read is bounded by the captured length; lengths claimed by headers
 * are only used as numbers (payload bytes on the wire), never to index.
 */
#include <string.h>

#include "decode.h"

#define ETH_IPV4	0x0800
#define ETH_IPV6	0x86DD
#define ETH_VLAN	0x8100
#define ETH_QINQ	0x88A8
#define ETH_QINQ_OLD	0x9100
#define ETH_MPLS	0x8847
#define ETH_MPLS_MC	0x8848
#define ETH_PPPOE	0x8864
#define PPP_IPV4	0x0021
#define PPP_IPV6	0x0057
#define IPPROTO_TCP_	6
#define MAX_ENCAPS	8	/* VLAN tags / MPLS labels / IPv6 ext headers */

static inline uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* A view of the bytes left: what was captured and what was on the wire. */
struct view {
	const uint8_t *p;
	uint32_t cap;
	uint32_t wire;
};

static int skip(struct view *v, uint32_t n)
{
	if (v->cap < n)
		return 0;
	v->p += n;
	v->cap -= n;
	v->wire = v->wire > n ? v->wire - n : 0;
	return 1;
}

/* Map a PPP protocol number to an ethertype (0 when not IP). */
static uint16_t ppp_to_ethertype(uint16_t proto)
{
	if (proto == PPP_IPV4)
		return ETH_IPV4;
	if (proto == PPP_IPV6)
		return ETH_IPV6;
	return 0;
}

/* Guess IPv4 or IPv6 from the version nibble (raw IP, MPLS payloads). */
static uint16_t sniff_ip(const struct view *v)
{
	if (v->cap < 1)
		return 0;
	switch (v->p[0] >> 4) {
	case 4:
		return ETH_IPV4;
	case 6:
		return ETH_IPV6;
	}
	return 0;
}

/* Ethernet II / 802.3 with VLAN stacks, LLC/SNAP, MPLS and PPPoE. */
static uint16_t ethernet(struct view *v)
{
	uint16_t type;
	int i;

	if (!skip(v, 12) || v->cap < 2)
		return 0;
	type = be16(v->p);
	skip(v, 2);
	for (i = 0; i < MAX_ENCAPS; i++) {
		if (type == ETH_VLAN || type == ETH_QINQ || type == ETH_QINQ_OLD) {
			if (v->cap < 4)
				return 0;
			type = be16(v->p + 2);
			skip(v, 4);
		} else if (type <= 1500) {
			/* 802.3 length: IP only behind an LLC/SNAP header */
			if (v->cap < 8 || v->p[0] != 0xAA || v->p[1] != 0xAA ||
			    v->p[2] != 0x03)
				return 0;
			type = be16(v->p + 6);
			skip(v, 8);
		} else if (type == ETH_MPLS || type == ETH_MPLS_MC) {
			while (v->cap >= 4 && !(v->p[2] & 0x01))
				skip(v, 4);
			if (!skip(v, 4))
				return 0;
			return sniff_ip(v);
		} else if (type == ETH_PPPOE) {
			if (v->cap < 8)
				return 0;
			type = ppp_to_ethertype(be16(v->p + 6));
			skip(v, 8);
			return type;
		} else {
			return type;
		}
	}
	return 0;
}

/* PPP in HDLC-like framing (RFC 1662), address/control and PFC optional. */
static uint16_t ppp(struct view *v)
{
	if (v->cap >= 2 && v->p[0] == 0xFF && v->p[1] == 0x03)
		skip(v, 2);
	if (v->cap >= 1 && (v->p[0] & 0x01)) {	/* compressed protocol field */
		uint16_t proto = v->p[0];

		skip(v, 1);
		return ppp_to_ethertype(proto);
	}
	if (v->cap < 2)
		return 0;
	{
		uint16_t proto = be16(v->p);

		skip(v, 2);
		return ppp_to_ethertype(proto);
	}
}

/* BSD loopback: the address family, in host order of the capturing host. */
static uint16_t loopback(struct view *v, int network_order)
{
	uint32_t le, be;

	if (v->cap < 4)
		return 0;
	be = be32(v->p);
	le = (uint32_t)v->p[3] << 24 | (uint32_t)v->p[2] << 16 |
	     (uint32_t)v->p[1] << 8 | v->p[0];
	skip(v, 4);
	if (network_order)
		le = be;
	if (le == 2 || be == 2)
		return ETH_IPV4;
	/* AF_INET6 is 10 on Linux, 24/28/30 on the BSDs and macOS */
	if (le == 10 || le == 24 || le == 28 || le == 30 ||
	    be == 10 || be == 24 || be == 28 || be == 30)
		return ETH_IPV6;
	return 0;
}

/* Strip the link header; return the ethertype of what follows, or 0. */
static uint16_t link_layer(int dlt, struct view *v)
{
	switch (dlt) {
	case TV_DLT_EN10MB:
		return ethernet(v);
	case TV_DLT_RAW:
	case TV_DLT_RAW_OPENBSD:
	case TV_DLT_RAW_LINKTYPE:
		return sniff_ip(v);
	case TV_DLT_IPV4:
		return ETH_IPV4;
	case TV_DLT_IPV6:
		return ETH_IPV6;
	case TV_DLT_NULL:
		return loopback(v, 0);
	case TV_DLT_LOOP:
		return loopback(v, 1);
	case TV_DLT_LINUX_SLL:
		if (v->cap < 16)
			return 0;
		{
			uint16_t type = be16(v->p + 14);

			skip(v, 16);
			return type;
		}
	case TV_DLT_LINUX_SLL2:
		if (v->cap < 20)
			return 0;
		{
			uint16_t type = be16(v->p);

			skip(v, 20);
			return type;
		}
	case TV_DLT_PPP:
	case TV_DLT_PPP_SERIAL:
		return ppp(v);
	case TV_DLT_C_HDLC:
		if (v->cap < 4)
			return 0;
		{
			uint16_t type = be16(v->p + 2);

			skip(v, 4);
			return type;
		}
	case TV_DLT_FDDI:
		/* frame control + two MACs, then LLC/SNAP */
		if (v->cap < 21 || v->p[13] != 0xAA || v->p[14] != 0xAA)
			return 0;
		{
			uint16_t type = be16(v->p + 19);

			skip(v, 21);
			return type;
		}
	}
	return 0;
}

int tv_dlt_supported(int dlt)
{
	switch (dlt) {
	case TV_DLT_NULL: case TV_DLT_EN10MB: case TV_DLT_PPP: case TV_DLT_FDDI:
	case TV_DLT_RAW: case TV_DLT_RAW_OPENBSD: case TV_DLT_PPP_SERIAL:
	case TV_DLT_RAW_LINKTYPE: case TV_DLT_C_HDLC: case TV_DLT_LOOP:
	case TV_DLT_LINUX_SLL: case TV_DLT_IPV4: case TV_DLT_IPV6:
	case TV_DLT_LINUX_SLL2:
		return 1;
	}
	return 0;
}

/* Look for the NGWA option among the IPv4 options at @opt (@len bytes). */
static void ipv4_options(const uint8_t *opt, uint32_t len, struct tv_segment *seg)
{
	uint32_t i = 0;

	while (i < len) {
		uint8_t type = opt[i];
		uint8_t olen;
		int ngwa = (type & 0x7F) == TV_NGWA_TYPE;

		if (type == 0)		/* end of option list */
			return;
		if (type == 1) {	/* no operation */
			i++;
			continue;
		}
		if (i + 1 >= len) {
			if (ngwa && !seg->ngwa_state)
				seg->ngwa_state = 2;
			return;
		}
		olen = opt[i + 1];
		if (olen < 2 || i + olen > len) {
			if (ngwa && !seg->ngwa_state)
				seg->ngwa_state = 2;
			return;
		}
		if (ngwa && !seg->ngwa_state) {
			if (olen == TV_NGWA_LEN) {
				seg->ngwa_state = 1;
				seg->ngwa = be32(opt + i + 2);
			} else {
				seg->ngwa_state = 2;
			}
		}
		i += olen;
	}
}

/* Returns 1 when an option's length is bad or runs past @len, as tcptrace -w
 * and tshark's expert info flag it; the options after it are not read. */
static int tcp_options(const uint8_t *opt, uint32_t len, struct tv_segment *seg)
{
	uint32_t i = 0;

	while (i < len) {
		uint8_t kind = opt[i];
		uint8_t olen;

		if (kind == 0)
			return 0;
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= len)
			return 1;
		olen = opt[i + 1];
		if (olen < 2 || i + olen > len)
			return 1;
		switch (kind) {
		case 2:
			if (olen == 4) {
				seg->has_mss = 1;
				seg->mss = be16(opt + i + 2);
			}
			break;
		case 3:
			if (olen == 3) {
				seg->has_wscale = 1;
				seg->wscale = opt[i + 2];
			}
			break;
		case 4:
			seg->sack_permitted = 1;
			break;
		case 5: {
			uint32_t n = (olen - 2) / 8, k;

			if (n > TV_MAX_SACK)
				n = TV_MAX_SACK;
			for (k = 0; k < n; k++) {
				seg->sack[k][0] = be32(opt + i + 2 + 8 * k);
				seg->sack[k][1] = be32(opt + i + 6 + 8 * k);
			}
			seg->nsack = (uint8_t)n;
			break;
		}
		case 8:
			if (olen == 10) {
				seg->has_ts = 1;
				seg->tsval = be32(opt + i + 2);
				seg->tsecr = be32(opt + i + 6);
			}
			break;
		}
		i += olen;
	}
	return 0;
}

/*
 * An IP length field left 0 (segmentation offload): the record's length on
 * the wire, @wire, stands in for it, but no more than the field can hold, so
 * that a record claiming 4 GB cannot make a few bytes count as gigabytes.
 */
static uint32_t len_from_record(uint32_t wire, struct tv_segment *seg)
{
	seg->len_from_record = wire > TV_IP_LEN_MAX ? 2 : 1;
	return wire > TV_IP_LEN_MAX ? TV_IP_LEN_MAX : wire;
}

/* TCP header at @v; @l4len is the TCP length the IP header claims. */
static int tcp(struct view *v, uint32_t l4len, struct tv_segment *seg)
{
	const uint8_t *p = v->p;
	uint32_t doff, optcap;

	if (v->cap < 20)
		return TV_TOO_SHORT;
	doff = (uint32_t)(p[12] >> 4) * 4;
	if (doff < 20 || l4len < doff)
		return TV_MALFORMED;
	seg->sport = be16(p);
	seg->dport = be16(p + 2);
	seg->seq = be32(p + 4);
	seg->ack = be32(p + 8);
	seg->flags = p[13];
	seg->win = be16(p + 14);
	seg->urp = be16(p + 18);
	seg->payload = l4len - doff;
	seg->captured_payload = v->cap > doff ? v->cap - doff : 0;
	if (seg->captured_payload > seg->payload)
		seg->captured_payload = seg->payload;
	optcap = (v->cap < doff ? v->cap : doff) - 20;
	seg->options_cut = tcp_options(p + 20, optcap, seg) || v->cap < doff;
	return TV_OK;
}

static int ipv4(struct view *v, struct tv_segment *seg)
{
	const uint8_t *p = v->p;
	uint32_t ihl, tot;

	if (v->cap < 20)
		return TV_TOO_SHORT;
	if (p[0] >> 4 != 4)
		return TV_MALFORMED;
	ihl = (uint32_t)(p[0] & 0x0F) * 4;
	if (ihl < 20)
		return TV_MALFORMED;
	if (p[9] != IPPROTO_TCP_)
		return TV_NOT_TCP;
	if (be16(p + 6) & 0x1FFF)
		return TV_FRAGMENT;
	if (v->cap < ihl)
		return TV_TOO_SHORT;
	tot = be16(p + 2);
	if (tot == 0)		/* segmentation offload: length left blank */
		tot = len_from_record(v->wire, seg);
	if (tot < ihl)
		return TV_MALFORMED;
	seg->family = 4;
	memcpy(seg->src, p + 12, 4);
	memset(seg->src + 4, 0, 12);
	memcpy(seg->dst, p + 16, 4);
	memset(seg->dst + 4, 0, 12);
	seg->ip_id = be16(p + 4);
	seg->ecn = p[1] & 3;
	ipv4_options(p + 20, ihl - 20, seg);
	skip(v, ihl);
	return tcp(v, tot - ihl, seg);
}

static int ipv6(struct view *v, struct tv_segment *seg)
{
	const uint8_t *p = v->p;
	uint32_t plen;
	uint8_t next;
	int i;

	if (v->cap < 40)
		return TV_TOO_SHORT;
	if (p[0] >> 4 != 6)
		return TV_MALFORMED;
	plen = be16(p + 4);
	if (plen == 0)		/* jumbogram or offload */
		plen = len_from_record(v->wire > 40 ? v->wire - 40 : 0, seg);
	next = p[6];
	seg->family = 6;
	seg->ecn = (p[1] >> 4) & 3;	/* the traffic class' low bits */
	memcpy(seg->src, p + 8, 16);
	memcpy(seg->dst, p + 24, 16);
	skip(v, 40);
	for (i = 0; i < MAX_ENCAPS; i++) {
		uint32_t hlen;

		switch (next) {
		case IPPROTO_TCP_:
			return tcp(v, plen, seg);
		case 0: case 43: case 60: case 135: case 139: case 140:
			if (v->cap < 2)
				return TV_TOO_SHORT;
			hlen = ((uint32_t)v->p[1] + 1) * 8;
			break;
		case 44:	/* fragment header */
			if (v->cap < 8)
				return TV_TOO_SHORT;
			if (be16(v->p + 2) & 0xFFF8)
				return TV_FRAGMENT;
			hlen = 8;
			break;
		case 51:	/* authentication header */
			if (v->cap < 2)
				return TV_TOO_SHORT;
			hlen = ((uint32_t)v->p[1] + 2) * 4;
			break;
		default:
			return TV_NOT_TCP;
		}
		if (hlen > plen)
			return TV_MALFORMED;
		next = v->p[0];
		if (!skip(v, hlen))
			return TV_TOO_SHORT;
		plen -= hlen;
	}
	return TV_NOT_TCP;
}

int tv_decode(int dlt, const uint8_t *data, uint32_t caplen, uint32_t wirelen,
	      struct tv_segment *seg)
{
	struct view v = { data, caplen, wirelen > caplen ? wirelen : caplen };
	uint16_t type;

	/* only what decoding may leave unset; the rest is always written */
	seg->has_mss = seg->has_wscale = seg->has_ts = seg->sack_permitted = 0;
	seg->nsack = 0;
	seg->ngwa_state = 0;
	seg->len_from_record = 0;
	seg->ecn = 0;
	type = link_layer(dlt, &v);
	if (type == ETH_IPV4)
		return ipv4(&v, seg);
	if (type == ETH_IPV6)
		return ipv6(&v, seg);
	return TV_NOT_TCP;
}
