#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# TP Channels between the two guests of the default fabric topology, under
# faults: BER 1e-5 on every link of both guests, 1 % drops and 1 %
# reordering in both switches. vm0 receives (ub-tp recv), vm1 sends (ub-tp
# send) a stream of checksummed messages of 1 B to 1 MiB over one RTP
# channel per retransmission combination (Go-Back-N or selective, with or
# without fast retransmission); the receiver checks every message arrives
# exactly once, in order and intact, and the counters show link retries
# (ubctl port show -s) and transport retransmissions (ub-tp --info).
#
# Skips (exit 4) without a UB controller, ub-tp or ubctl, or without the
# peer guest (ubtest.solo=1).

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

. "$DIR/ub_lib.sh"

UBTP=$(command -v ub-tp)
# Messages per channel, and their sizes (both ends derive the same
# sequence from the seed).
COUNT=${UB_TP_COUNT:-40}
SIZES=${UB_TP_SIZES:-1-1048576}

ktap_print_header
ub_require ubctl ub-tp
ub_require_peer

# ktap_test_result runs its command unquoted ($@): each test is one word.
t_config() { ub_configure; }
# The peer answers echoes (it configured its address too).
t_peer() { ub_peer_answers; }
# Retry_Req_Sets sent by this guest's ports (the bring-up sends one).
retries() {
	"$UBCTL" -j -s port show 0 | grep -o '"retry-req-sets":[0-9]*' | cut -d: -f2 |
		awk '{s += $1} END {print s + 0}'
}
# Malformed and refused ioctls, reads and writes on /dev/ub_tp (ub-tp
# abi-check: each gets its errno and leaves the file as it was). The
# device has its address already; vm0 only (it needs no peer).
t_abi() {
	[ "$guest" = 0 ] || { echo "# vm0 runs it"; return 0; }
	"$UBTP" abi-check --dev 0 > /tmp/ub-tp-abi.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-tp-abi.out
	return $rc
}
# vm0 does more before some streams than vm1 (ub-tp abi-check, twice as
# many fabric changes). A channel vm1 opens is accepted by vm0's endpoint
# at once and holds what it receives until a file binds it, but it goes
# with the sender's close: a stream vm1 finishes before vm0 binds is lost,
# and every later case runs out of step. So after those steps the sender
# lets the receiver go first.
sender_waits() {
	[ "$guest" = 1 ] && sleep "$1"
	return 0
}
# The faults: each guest its own links; vm0 the switches.
t_faults() {
	retries_before=$(retries)
	fabric link "vm$guest.0" --ber 1e-5
	fabric link "vm$guest.1" --ber 1e-5
	if [ "$guest" = 0 ]; then
		fabric switch sw0 --drop 0.01 --reorder 0.01
		fabric switch sw1 --drop 0.01 --reorder 0.01
	fi
	sleep 2
	sender_waits 5
}
t_clear() {
	fabric link "vm$guest.0" --ber 0
	fabric link "vm$guest.1" --ber 0
	if [ "$guest" = 0 ]; then
		fabric switch sw0 --drop 0 --reorder 0
		fabric switch sw1 --drop 0 --reorder 0
	fi
	sender_waits 2
}
# stream KEY ARGS...: one channel named KEY, COUNT messages vm1 -> vm0.
stream() {
	key=$1
	shift
	if [ "$guest" = 0 ]; then
		# A sender that failed may leave this end in RTS with nobody
		# sending: give up after a minute without a message.
		"$UBTP" recv --dev 0 --from "$them" --key "$key" --count "$COUNT" --sizes "$SIZES" \
			--seed "$key" --timeout-ms 120000 --idle-timeout-ms 60000 --info "$@" \
			> /tmp/ub-tp.out 2>&1
	else
		"$UBTP" send --dev 0 --to "$them" --key "$key" --count "$COUNT" --sizes "$SIZES" \
			--seed "$key" --timeout-ms 120000 --info "$@" > /tmp/ub-tp.out 2>&1
	fi
	rc=$?
	sed 's/^/# /' /tmp/ub-tp.out
	return $rc
}
t_gbn() { stream 101 --retransmit gbn; }
t_gbn_fast() { stream 102 --retransmit gbn --fast-retransmit; }
t_sr() { stream 103 --retransmit sr; }
t_sr_fast() { stream 104 --retransmit sr --fast-retransmit; }
# Both ends O_NONBLOCK, waiting in poll() whenever a read or write would
# block: ub-tp fails the run if a call says EAGAIN after poll() reported it
# ready (what a file without a poll hook does), and each end must have
# waited (200 messages: more than the sender's queue of 64 holds).
t_poll() {
	saved="$COUNT $SIZES"
	COUNT=200
	SIZES=1-65536
	stream 107 --retransmit sr --fast-retransmit --poll &&
		grep -Eq "poll-waits [1-9]" /tmp/ub-tp.out
	rc=$?
	COUNT=${saved% *}
	SIZES=${saved#* }
	return $rc
}
# The sender is done (every message acknowledged) and has closed its end
# before the receiver binds: the receiver's kernel keeps the closed
# channel's messages for a binder, who reads them all, then the end.
t_late_reader() {
	[ "$guest" = 0 ] && sleep 15
	stream 108 --retransmit sr --fast-retransmit
	rc=$?
	# vm1 waits as long, so that both start the next case together.
	sender_waits 15
	return $rc
}
# The in-kernel API: vm0 loads samples/ub/ub_echo.ko, a module that serves
# channel 109 through <linux/ub.h>; vm1's ub-tp echo sends 50 checksummed
# messages and checks each comes back whole. vm0 checks the module counted
# them, saw the peer close (its error callback with 0) and unloads.
ECHO_MODULE=${UB_ECHO_MODULE:-/lib/modules/ub_echo.ko}
echoed() {
	cat /sys/module/ub_echo/parameters/echoed 2>/dev/null || echo 0
}
t_kernel_echo() {
	if [ "$guest" = 1 ]; then
		sleep 3
		"$UBTP" echo --dev 0 --to "$them" --key 109 --count 50 --sizes 1-65536 --seed 109 \
			--idle-timeout-ms 180000 \
			--retransmit sr --fast-retransmit --info > /tmp/ub-tp.out 2>&1
		rc=$?
		sed 's/^/# /' /tmp/ub-tp.out
		sleep 5
		return $rc
	fi
	insmod "$ECHO_MODULE" dev=0 key=109 || return 1
	i=0
	until [ "$(echoed)" -ge 50 ] && dmesg | grep -q "ub_echo: channel 109 ended (0)"; do
		i=$((i + 1))
		if [ $i -gt 600 ]; then
			echo "# ub_echo echoed $(echoed) of 50"
			dmesg | grep ub_echo | sed 's/^/# /'
			rmmod ub_echo
			return 1
		fi
		sleep 0.1
	done
	echo "# ub_echo echoed $(echoed) of 50, then the peer closed"
	rmmod ub_echo && ! dmesg | grep -q "ub_echo: \(reply not sent\|cannot\|out of memory\)"
}
# The channels in netlink while a stream runs (ubctl tp show, `tp-get`):
# the one named KEY is in RTS and counts data packets on this side (vm1
# sends, vm0 receives); after the stream, `ubctl monitor` saw it close
# (`tp-change-ntf`, state closed). The watcher polls in the background and
# leaves its verdict in /tmp/ub-tp-seen. Runs under the faults, right
# after the four combinations (both guests reach it about together).
TP_KEY=112
# tp_rts_line [KEY]: channel KEY (default TP_KEY) as tp show lists it.
tp_rts_line() {
	rts_key=${1:-$TP_KEY}
	[ "$guest" = 1 ] && dir=tx || dir=rx
	# One line per channel (entries start with "dev-index"), then the one
	# with our key, in RTS, with data packets counted in our direction.
	"$UBCTL" -j -s tp show 0 2> /dev/null |
		awk '{ gsub(/\},\{"dev-index"/, "}\n{\"dev-index\""); print }' |
		grep "\"key\":$rts_key," | grep '"state":"rts"' | grep -E "\"$dir-packets\":[1-9]"
}
tp_watch() {
	i=0
	while [ $i -lt 600 ] && [ ! -e /tmp/ub-tp-done ]; do
		if line=$(tp_rts_line); then
			echo "$line" > /tmp/ub-tp-seen
			return 0
		fi
		i=$((i + 1))
		sleep 0.05
	done
}
t_tp_netlink() {
	rm -f /tmp/ub-tp-seen /tmp/ub-tp-done /tmp/ub-tp-mon.out
	"$UBCTL" -j monitor > /tmp/ub-tp-mon.out 2>&1 &
	mon=$!
	tp_watch &
	watch=$!
	sleep 0.5
	# The receiver must bind before the stream ends (see sender_waits).
	sender_waits 2
	saved="$COUNT $SIZES"
	COUNT=200
	SIZES=1-65536
	stream $TP_KEY --retransmit sr --fast-retransmit
	rc=$?
	COUNT=${saved% *}
	SIZES=${saved#* }
	touch /tmp/ub-tp-done
	wait $watch
	# The files are closed: the channel is torn down and announced.
	i=0
	until grep -q "\"object\":\"tp\".*\"key\":$TP_KEY,\"state\":\"closed\"" /tmp/ub-tp-mon.out; do
		i=$((i + 1))
		[ $i -le 100 ] || break
		sleep 0.1
	done
	kill $mon 2> /dev/null
	wait $mon 2> /dev/null
	sed 's/^/# monitor: /' /tmp/ub-tp-mon.out | grep '"object":"tp"' | head -n 20
	[ $rc -eq 0 ] || return 1
	if [ ! -s /tmp/ub-tp-seen ]; then
		echo "# ubctl tp show never listed channel $TP_KEY in RTS with packets:"
		"$UBCTL" -s tp show 0 2>&1 | sed 's/^/# /'
		return 1
	fi
	echo "# seen: $(cat /tmp/ub-tp-seen)"
	grep -q "\"object\":\"tp\".*\"key\":$TP_KEY,\"state\":\"closed\"" /tmp/ub-tp-mon.out
}
# TP Channel Groups: one file over 4 RTP channels (keys KEY..KEY+3), each
# sprayed over both planes, under the faults. The receiver checks every
# message arrives exactly once, in the order written (across the members),
# intact; the watcher (as tp_watch) records each member netlink shows in
# RTS with data packets in this guest's direction: the group used all four.
tpg_watch() {
	: > /tmp/ub-tpg-seen
	i=0
	while [ $i -lt 3000 ] && [ ! -e /tmp/ub-tp-done ]; do
		for k in $1 $(($1 + 1)) $(($1 + 2)) $(($1 + 3)); do
			if ! grep -qx "$k" /tmp/ub-tpg-seen && tp_rts_line "$k" > /dev/null; then
				echo "$k" >> /tmp/ub-tpg-seen
			fi
		done
		i=$((i + 1))
		sleep 0.1
	done
}
tpg_stream() {
	key=$1
	shift
	rm -f /tmp/ub-tp-done
	tpg_watch "$key" &
	watch=$!
	saved=$SIZES
	# A group's messages carry its 8-byte header: 1 MiB - 8 at most.
	SIZES=1-1048568
	stream "$key" "$@" --members 4 --per-packet
	rc=$?
	SIZES=$saved
	touch /tmp/ub-tp-done
	wait $watch
	echo "# members seen carrying data: $(tr '\n' ' ' < /tmp/ub-tpg-seen)"
	[ $rc -eq 0 ] && grep -q "members 4" /tmp/ub-tp.out &&
		[ "$(wc -l < /tmp/ub-tpg-seen)" -eq 4 ]
}
t_tpg_sr() { tpg_stream 120 --retransmit sr; }
t_tpg_gbn() { tpg_stream 130 --retransmit gbn; }
# A group made with ubctl (netlink tpg-new), under the faults: vm1 opens a
# group of 4 sprayed channels to vm0 (keys 140..143); it waits in vm1's
# tables, unclaimed, its members reach RTS with vm0's endpoint (which
# accepts each for a binder). ubctl tpg show lists it with its members;
# a group over keys it holds is refused (EEXIST, naming tp.key) and makes
# nothing; tpg set suspends and resumes every member. Then ub-tp send
# --members 4 (a connecting group bind) claims it, and vm0's ub-tp recv
# --members 4 checks every message arrives once, in order, intact.
TPG_KEY=140
tpg_keys() {
	grep -o '"key":[0-9]*' | cut -d: -f2 | tr '\n' ' '
}
t_tpg_add() {
	saved=$SIZES
	SIZES=1-1048568
	if [ "$guest" = 0 ]; then
		stream $TPG_KEY --members 4 --per-packet --retransmit sr
		rc=$?
		SIZES=$saved
		return $rc
	fi
	rc=1
	if g=$("$UBCTL" tpg add 0 remote "$them" key $TPG_KEY members 4 retransmit sr \
		fast-retransmit off lb per-packet 2>&1) &&
		echo "# ubctl tpg add: group $g" &&
		tpg_wait "$g" '"state":"rts"' &&
		tpg_json "$g" | sed 's/^/# made: /' &&
		tpg_json "$g" | grep '"claimed":0' | grep -q '"members":4' &&
		[ "$(tpg_json "$g" | tpg_keys)" = "$TPG_KEY 140 141 142 143 " ] &&
		tpg_overlap "$g" &&
		"$UBCTL" tpg set 0 "$g" state suspended && tpg_wait "$g" '"state":"suspended"' &&
		"$UBCTL" tpg set 0 "$g" state rts && tpg_wait "$g" '"state":"rts"'; then
		# Claimed while the stream runs (the watcher's verdict in
		# /tmp/ub-tpg-claimed).
		( tpg_wait "$g" '"claimed":1' > /dev/null && touch /tmp/ub-tpg-claimed ) &
		watch=$!
		rm -f /tmp/ub-tpg-claimed
		stream $TPG_KEY --members 4 --per-packet --retransmit sr
		rc=$?
		wait $watch
		[ -e /tmp/ub-tpg-claimed ] || { echo "# group $g never shown claimed"; rc=1; }
		grep -Eq "error [0-9]+ tpn $g .*members 4" /tmp/ub-tp.out || { echo "# ub-tp did not bind group $g"; rc=1; }
	else
		echo "# $g"
	fi
	SIZES=$saved
	return $rc
}
# tpg_overlap GROUP: a group over keys 142..143 overlaps GROUP's members:
# refused with EEXIST naming tp.key, and no channel made.
tpg_overlap() {
	before=$("$UBCTL" -j tp show 0 | grep -o '"tpn":' | wc -l)
	if "$UBCTL" tpg add 0 remote "$them" key 142 members 2 > /tmp/ub-tpg-err.out 2>&1; then
		echo "# ubctl tpg add over group $1's keys succeeded"
		return 1
	fi
	sed 's/^/# /' /tmp/ub-tpg-err.out
	after=$("$UBCTL" -j tp show 0 | grep -o '"tpn":' | wc -l)
	grep -q "exists already" /tmp/ub-tpg-err.out && grep -q "tp.key" /tmp/ub-tpg-err.out &&
		[ "$before" = "$after" ]
}
# Forged packets towards a live channel (issue 11, acceptance 6): while
# vm1 streams to vm0, vm0 reads its channel's TPN and the peer's from
# ubctl tp show and asks the host (ub-fabric forge, Documentation/ub/
# fabric.rst) for RTP data packets to that TPN, sealed at every layer and
# framed by the switch's link engine: 3 from a wrong source address and 2
# with a wrong source TPN (both with the next PSN, so only the peer check
# keeps them from the reader), 1 built from its fields alone from a wrong
# source, 2 from the peer with a PSN 2^22 past its last packet (outside
# the window whatever the receiver expects: the fabric takes the PSN from
# the channel's next packet, which it queues right before them), and 2
# replays of that packet. net-stats' wrong-peer rises by exactly 6, the
# channel counts exactly 2 invalid PSNs (a sender never goes past its
# window) and at least 2 duplicates (spurious RTOs under TCG add their
# own: 583 = 581 retransmissions + 2 replays in one run), and the stream
# still arrives exactly once, in order, intact (ub-tp recv checks it).
FORGE_KEY=113
# forge_tp FIELD: a number from the line of channel FORGE_KEY in RTS with
# data received, in ubctl tp show; fails if there is none.
forge_tp() { ub_channel_field $FORGE_KEY "$1"; }
t_forged() {
	saved="$COUNT $SIZES"
	COUNT=500
	SIZES=4096-65536
	if [ "$guest" = 1 ]; then
		sender_waits 2
		stream $FORGE_KEY --retransmit sr --fast-retransmit
		rc=$?
		COUNT=${saved% *}
		SIZES=${saved#* }
		return $rc
	fi
	before=$(ub_wrong_peer)
	stream $FORGE_KEY --retransmit sr --fast-retransmit > /tmp/ub-tp-forged.out &
	rcv=$!
	i=0
	until tpn=$(forge_tp tpn); do
		i=$((i + 1))
		[ $i -le 600 ] || break
		sleep 0.05
	done
	peer_tpn=$(forge_tp peer-tpn)
	if [ -n "$tpn" ] && [ -n "$peer_tpn" ]; then
		# "vm0": whichever port the channel's next packet takes.
		ub_forge vm0 --dst-tpn "$tpn" --src 10.0.9.100 --psn-ahead 1 --count 3
		ub_forge vm0 --dst-tpn "$tpn" --src-tpn $(((peer_tpn + 1) % 16777216)) --psn-ahead 1 --count 2
		ub_forge vm0.0 --dst-tpn "$tpn" --src 10.0.9.100 --dst "$me" --src-tpn "$peer_tpn" --psn 0
		ub_forge vm0 --dst-tpn "$tpn" --psn-ahead 4194304 --count 2
		ub_forge vm0 --dst-tpn "$tpn" --replay --count 2
	fi
	wait $rcv
	rc=$?
	COUNT=${saved% *}
	SIZES=${saved#* }
	cat /tmp/ub-tp-forged.out
	[ -n "$tpn" ] || { echo "# channel $FORGE_KEY never in RTS with data in ubctl tp show"; return 1; }
	after=$(ub_wrong_peer)
	invalid=$(awk '$2 == "rx_invalid_psn" { print $3 }' /tmp/ub-tp-forged.out)
	dups=$(awk '$2 == "rx_duplicates" { print $3 }' /tmp/ub-tp-forged.out)
	echo "# tpn $tpn peer-tpn $peer_tpn: wrong-peer $before -> $after, rx_invalid_psn $invalid, rx_duplicates $dups"
	[ $rc -eq 0 ] && [ $((after - before)) -eq 6 ] && [ "${invalid:-0}" -eq 2 ] &&
		[ "${dups:-0}" -ge 2 ]
}
# A TPN no channel has: ubctl fails, naming the problem (the kernel's
# extended ACK) and the attribute.
t_tp_unknown() {
	if "$UBCTL" tp show 0 99999 > /tmp/ub-tp-err.out 2>&1; then
		echo "# ubctl tp show 0 99999 succeeded"
		return 1
	fi
	sed 's/^/# /' /tmp/ub-tp-err.out
	grep -q "no TP Channel with this TPN" /tmp/ub-tp-err.out && grep -q "tp.tpn" /tmp/ub-tp-err.out
}
# A channel made with ubctl (netlink tp-new): vm1 opens channel 116 to vm0
# with attributes that are not the driver's defaults; it waits in vm1's
# table, unclaimed, and reaches RTS with vm0's endpoint (which accepts it
# for a binder, as any channel a peer opens). ubctl tp show lists what the
# two ends agreed; tp set suspends and resumes it; then ub-tp send binds
# the same peer and key, claims it, and streams to vm0's ub-tp recv.
# Then channel 114: vm1 opens it the same way, streams into it, and tears
# it down mid-stream with ubctl tp del: vm1's writer fails with
# ECONNABORTED, vm0's reader sees the end of the stream after intact
# messages only, and the channel is gone from vm1's table.
tp_json() {
	"$UBCTL" -j tp show 0 "$1" 2> /dev/null
}
tpg_json() {
	"$UBCTL" -j tpg show 0 "$1" 2> /dev/null
}
# obj_wait tp|tpg TPN PATTERN: up to 5 s for the channel's (or the group's)
# JSON to match.
obj_wait() {
	i=0
	until "${1}_json" "$2" | grep -q "$3"; do
		i=$((i + 1))
		if [ $i -gt 50 ]; then
			echo "# $1 $2 never matched $3: $("${1}_json" "$2")"
			return 1
		fi
		sleep 0.1
	done
}
tp_wait() { obj_wait tp "$@"; }
tpg_wait() { obj_wait tpg "$@"; }
# obj_gone tp|tpg TPN: up to 5 s for the channel (or group) to leave the
# table.
obj_gone() {
	i=0
	while "${1}_json" "$2" > /dev/null; do
		i=$((i + 1))
		[ $i -le 50 ] || { echo "# $1 $2 still listed: $("${1}_json" "$2")"; return 1; }
		sleep 0.1
	done
}
# del_writer tp|tpg TPN KEY [ARGS...]: vm1 streams KEY into the channel (or
# group) TPN it made, and tears it down mid-stream once a bind claimed it:
# the writer must fail with ECONNABORTED, and TPN leave the table.
del_writer() {
	obj=$1
	id=$2
	key=$3
	shift 3
	"$UBTP" send --dev 0 --to "$them" --key "$key" --count 100000 --sizes 4096 --seed "$key" \
		--timeout-ms 60000 "$@" > /tmp/ub-tp.out 2>&1 &
	snd=$!
	sleep 2
	obj_wait "$obj" "$id" '"claimed":1' && "$UBCTL" "$obj" del 0 "$id"
	del=$?
	wait "$snd"
	rc=$?
	sed 's/^/# /' /tmp/ub-tp.out | tail -3
	obj_gone "$obj" "$id" && [ $del -eq 0 ] && [ $rc -ne 0 ] && grep -q ECONNABORTED /tmp/ub-tp.out
}
# del_reader KEY [ARGS...]: vm0 reads the stream KEY that vm1 tears down
# mid-stream: the reader must end (not time out) with an error or the end,
# after intact messages only, in order, each once.
del_reader() {
	key=$1
	shift
	timeout 40 "$UBTP" recv --dev 0 --from "$them" --key "$key" --count 100000 --sizes 4096 \
		--seed "$key" --timeout-ms 60000 "$@" > /tmp/ub-tp.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-tp.out | tail -3
	[ $rc -ne 0 ] && [ $rc -ne 124 ] &&
		! grep -Eq "corrupt [1-9]|out-of-order [1-9]|duplicates [1-9]" /tmp/ub-tp.out
}
t_tp_add() {
	saved="$COUNT $SIZES"
	COUNT=20
	SIZES=1-65536
	if [ "$guest" = 0 ]; then
		stream 116
		rc=$?
	else
		rc=1
		if tpn=$("$UBCTL" tp add 0 remote "$them" key 116 retransmit sr fast-retransmit off \
			ooo-window 512 rto dynamic base 20000 n 1 retry-limit 6 mtu 1024 2>&1) &&
			echo "# ubctl tp add: TPN $tpn" &&
			tp_wait "$tpn" '"state":"rts"' &&
			tp_json "$tpn" | sed 's/^/# agreed: /' &&
			tp_json "$tpn" | grep '"claimed":0' | grep '"mode":"selective"' |
			grep '"fast-retransmit":0' | grep '"mtu":1024' | grep '"rto-base-us":20000' |
				grep -q '"retry-limit":6' &&
			"$UBCTL" tp set 0 "$tpn" state suspended && tp_wait "$tpn" '"state":"suspended"' &&
			"$UBCTL" tp set 0 "$tpn" state rts && tp_wait "$tpn" '"state":"rts"'; then
			stream 116
			rc=$?
		else
			echo "# $tpn"
		fi
	fi
	COUNT=${saved% *}
	SIZES=${saved#* }
	return $rc
}
# A listen bind claims a channel made with ubctl too: vm1 opens channel 115
# to vm0 with ubctl tp add and listens for it (ub-tp recv, the listen
# bind takes its own unclaimed channel); vm0's ub-tp send binds the
# channel vm1 opened. vm0 waits until vm1's channel is there (otherwise
# its connect would open one towards vm1 first, and vm1's tp add would find
# that one: EEXIST).
t_tp_add_listen() {
	if [ "$guest" = 0 ]; then
		sleep 2
		"$UBTP" send --dev 0 --to "$them" --key 115 --count 20 --sizes 1-65536 --seed 115 \
			--timeout-ms 60000 > /tmp/ub-tp.out 2>&1
	else
		tpn=$("$UBCTL" tp add 0 remote "$them" key 115 mtu 2048) || return 1
		"$UBTP" recv --dev 0 --from "$them" --key 115 --count 20 --sizes 1-65536 --seed 115 \
			--timeout-ms 60000 --info > /tmp/ub-tp.out 2>&1
	fi
	rc=$?
	sed 's/^/# /' /tmp/ub-tp.out | head -n 3
	[ "$guest" = 0 ] || grep -Eq "error [0-9]+ tpn $tpn " /tmp/ub-tp.out || { echo "# not TPN $tpn"; rc=1; }
	return $rc
}
# One key, two channels back to back: vm1's second connect finds the first
# channel still closing (its DREQ in flight) and waits for the teardown
# (tp.rst, "A key reused right after a close"); vm0's end ignores a REQ
# for a key it is still closing until its DREP comes. Both streams arrive
# whole (before the fix: EADDRINUSE, or a REJ and ECONNREFUSED).
REUSE_KEY=117
t_key_reuse() {
	saved="$COUNT $SIZES"
	COUNT=20
	SIZES=1-65536
	rc=0
	for round in 1 2; do
		stream $REUSE_KEY --retransmit sr || { echo "# round $round failed"; rc=1; }
	done
	COUNT=${saved% *}
	SIZES=${saved#* }
	return $rc
}
t_tp_del() {
	if [ "$guest" = 0 ]; then
		del_reader 114
		return
	fi
	tpn=$("$UBCTL" tp add 0 remote "$them" key 114) || return 1
	del_writer tp "$tpn" 114
}
# A group made with ubctl is torn down mid-stream with ubctl tpg del (keys
# 150..153): vm1's writer fails with ECONNABORTED, vm0's reader gets
# intact messages only, in order, then an error or the end; the group is
# gone from vm1's table, and ubctl monitor saw it reach RTS and end
# (tpg-change-ntf).
t_tpg_del() {
	if [ "$guest" = 0 ]; then
		del_reader 150 --members 4
		return
	fi
	"$UBCTL" -j monitor > /tmp/ub-tpg-mon.out 2>&1 &
	mon=$!
	sleep 0.5
	g=$("$UBCTL" tpg add 0 remote "$them" key 150 members 4) || { kill $mon; return 1; }
	del_writer tpg "$g" 150 --members 4
	rc=$?
	kill $mon 2> /dev/null
	wait $mon 2> /dev/null
	grep '"object":"tpg"' /tmp/ub-tpg-mon.out | sed 's/^/# monitor: /' | head -n 10
	ntf="\"object\":\"tpg\",\"dev-index\":0,\"tpn\":$g,"
	[ $rc -eq 0 ] && grep "$ntf" /tmp/ub-tpg-mon.out | grep -q '"state":"rts"' &&
		grep "$ntf" /tmp/ub-tpg-mon.out | grep -q '"state":"closed"'
}
# vm1's plane 1 is pulled while the stream runs (faults off): the channel
# carries on over plane 0 (the endpoint leaves the down port out of its
# routes, the switches route round it) and loses nothing.
t_plane_down() {
	if [ "$guest" = 1 ]; then
		( sleep 1; fabric link vm1.1 --down ) &
	fi
	stream 105 --retransmit sr --fast-retransmit
	rc=$?
	if [ "$guest" = 1 ]; then
		wait
		fabric link vm1.1 --up
	fi
	return $rc
}
# Every path between the guests goes (both of vm1's links): the sending
# channel reaches ERR within its retry limit (about 4 s of RTOs) and
# write()/read() report ETIMEDOUT. The receiver gets only intact messages,
# exactly once, before it gives up.
t_paths_gone() {
	if [ "$guest" = 1 ]; then
		( sleep 1; fabric link vm1.0 --down; fabric link vm1.1 --down ) &
		"$UBTP" send --dev 0 --to "$them" --key 106 --count 100000 --sizes 4096 --seed 106 \
			--timeout-ms 60000 --info > /tmp/ub-tp.out 2>&1
		rc=$?
		wait
		sed 's/^/# /' /tmp/ub-tp.out
		fabric link vm1.0 --up
		fabric link vm1.1 --up
		[ $rc -ne 0 ] && grep -q ETIMEDOUT /tmp/ub-tp.out && grep -q "state Err" /tmp/ub-tp.out
	else
		timeout 40 "$UBTP" recv --dev 0 --from "$them" --key 106 --count 100000 \
			--sizes 4096 --seed 106 --timeout-ms 60000 > /tmp/ub-tp.out 2>&1
		sed 's/^/# /' /tmp/ub-tp.out
		! grep -Eq "corrupt [1-9]|out-of-order [1-9]|duplicates [1-9]" /tmp/ub-tp.out
	fi
}
# vm0's controller is unbound while a stream runs: vm0's reader gets ENODEV
# (after the messages already received), vm1's writer gives up with an
# error instead of hanging, and the controller binds again. The debug
# kernel's KASAN, lockdep and kmemleak watch the teardown under traffic.
t_unbind_tp() {
	if [ "$guest" = 1 ]; then
		timeout 120 "$UBTP" send --dev 0 --to "$them" --key 110 --count 1000000 --sizes 4096 \
			--seed 110 --timeout-ms 60000 > /tmp/ub-tp.out 2>&1
		rc=$?
		sed 's/^/# /' /tmp/ub-tp.out | tail -3
		sleep 5
		[ $rc -ne 0 ] && [ $rc -ne 124 ]
		return
	fi
	pci=$(basename "$(readlink -f /sys/bus/pci/drivers/ub/0000:* 2>/dev/null | head -1)")
	[ -n "$pci" ] || return 1
	"$UBTP" recv --dev 0 --from "$them" --key 110 --count 1000000 --sizes 4096 --seed 110 \
		--timeout-ms 60000 > /tmp/ub-tp.out 2>&1 &
	rcv=$!
	sleep 4
	echo "$pci" > /sys/bus/pci/drivers/ub/unbind || return 1
	wait "$rcv"
	rc=$?
	sed 's/^/# /' /tmp/ub-tp.out | tail -3
	echo "$pci" > /sys/bus/pci/drivers/ub/bind || return 1
	[ $rc -ne 0 ] && grep -q ENODEV /tmp/ub-tp.out &&
		! grep -Eq "corrupt [1-9]|out-of-order [1-9]|duplicates [1-9]" /tmp/ub-tp.out
}
# An open /dev/ub_tp holds the module: rmmod refuses while it is open.
t_rmmod_held() {
	[ "$guest" = 0 ] || return 0
	sleep 3 < /dev/ub_tp &
	holder=$!
	sleep 1
	if rmmod ub 2> /tmp/rmmod.err; then
		wait "$holder"
		return 1
	fi
	sed 's/^/# /' /tmp/rmmod.err
	wait "$holder"
}
# The link layer repaired bit errors on this guest's links.
t_link_retries() {
	n=$(retries)
	echo "# retry-req-sets on this guest's ports: $retries_before before the faults, $n after"
	[ "$n" -gt "$retries_before" ]
}

ktap_set_plan 30
ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "links up, address and route configured" t_config
ktap_test_result "the peer answers" t_peer
ktap_test_result "ub-tp abi-check: malformed and refused calls get their errno" t_abi
ktap_test_result "faults on: BER 1e-5, 1 % drops and reordering" t_faults
ktap_test_result "Go-Back-N: $COUNT messages exactly once, intact" t_gbn
ktap_test_result "Go-Back-N, fast retransmit: exactly once, intact" t_gbn_fast
ktap_test_result "selective: exactly once, intact" t_sr
ktap_test_result "selective, fast retransmit: exactly once, intact" t_sr_fast
ktap_test_result "selective, fast retransmit, both ends in poll(): exactly once, intact" t_poll
ktap_test_result "TP Channel Group of 4, per-packet spraying, selective: exactly once, in order, intact" t_tpg_sr
ktap_test_result "TP Channel Group of 4, per-packet spraying, Go-Back-N: exactly once, in order, intact" t_tpg_gbn
ktap_test_result "ubctl tpg add: group of 4 listed, overlap refused, suspend/resume, claimed by ub-tp send --members 4" t_tpg_add
ktap_test_result "ubctl tp show: the stream's channel in RTS, packets counted; monitor saw it close" t_tp_netlink
ktap_test_result "ubctl tp show of an unknown TPN fails, naming it" t_tp_unknown
ktap_test_result "link retries on this guest's links" t_link_retries
t_clear
ktap_test_result "forged packets to a live channel: wrong source counted, far PSN and replays dropped, stream intact" t_forged
ktap_test_result "ubctl tp add: non-default attributes agreed, suspend/resume, claimed by ub-tp send" t_tp_add
ktap_test_result "ubctl tp add, then a listen bind claims the channel" t_tp_add_listen
ktap_test_result "one key, two channels back to back: the second waits for the first's teardown" t_key_reuse
ktap_test_result "ubctl tp del mid-stream: writer gets ECONNABORTED, channel gone" t_tp_del
ktap_test_result "ubctl tpg del mid-stream: writer gets ECONNABORTED, group gone, monitor saw it" t_tpg_del
ktap_test_result "the sender closed before the receiver bound: every message still read" t_late_reader
ktap_test_result "in-kernel API: samples/ub/ub_echo.ko echoes 50 messages to vm1, intact" t_kernel_echo
ktap_test_result "plane 1 of vm1 pulled mid-stream: nothing lost" t_plane_down
ktap_test_result "every path gone: ERR with ETIMEDOUT, nothing corrupt" t_paths_gone
ktap_test_result "controller unbound under traffic: reader gets ENODEV, writer gives up" t_unbind_tp
ktap_test_result "rmmod refused while /dev/ub_tp is open" t_rmmod_held
ktap_test_result "rmmod ub" rmmod ub
ktap_test_result "ub is gone" test ! -e /sys/module/ub
ktap_finished
