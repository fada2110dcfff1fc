#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Isolation between network partitions (NPI, UB spec §5.3.3.1) on the
# default fabric topology's two guests. Both keep strict NPI mode (one NPI
# per entity: the controller inserts it and accepts only packets of its
# partition ID, and of those not two low-privilege ones). vm1 stays in the
# default partition (1, high privilege) and serves; vm0 moves and checks:
#
# - in partition 5, not one of 10 echoes to vm1 comes back (each
#   direction is dropped at the receiver); back in 1, all of them do;
# - forged packets (ub-fabric forge, built from scratch towards a TPN no
#   channel has) are counted exactly where they are refused: 5 of another
#   partition raise vm0's npi-drops by 5; 5 of its own partition pass the
#   NPI check and raise unknown-channel by 5, from a high- or a
#   low-privilege sender alike;
# - as a low-privilege member of partition 1, vm0 still exchanges echoes
#   with vm1 (high), but 5 forged packets from another low-privilege
#   member raise npi-drops by 5;
# - the switch path: vm0 in partition 5, vm1 in 1, and the switch ports
#   facing vm1 write NPI 5 into what vm1 sends and NPI 1 into what it
#   receives (a switch assigning partitions at its edge): echoes pass
#   again; with the rewrite off, none do.
#
# vm1 learns that vm0 is done from a one-message TP Channel vm0 opens at
# the end (key 990). Then a storm of forged packets against a live
# channel: vm1 streams 2000 checksummed 4 KiB messages to vm0 twice (keys
# 991 and 992); during the second, the fabric queues 5 x 1000 packets with
# the channel's TPNs and the PSN it expects next, from a third address,
# towards vm0. Each must be dropped and counted (wrong-peer +5000
# exactly), the stream must arrive whole, and the storm may add at most
# 2 ms per forged packet to it (10 s for the 5000): each forged packet costs
# the receiving guest a fixed amount of work (about 0.4 ms under TCG), so
# the bound is per packet, not a ratio to a stream whose own time varies
# from 0.9 to 4 s between runs.
#
# Skips (exit 4) without a UB controller, ubctl or ub-tp, or without the
# peer guest (ubtest.solo=1).

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"
. "$DIR/ub_lib.sh"

UBTP=$(command -v ub-tp)
DONE_KEY=990
STORM_COUNT=2000
# A TPN no channel of vm0 has.
NO_TPN=4242

ktap_print_header
ub_require ubctl ub-tp
ub_require_peer

# Counter NAME of device 0 (net-stats).
stat() {
	"$UBCTL" -j -s dev show 0 | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2
}
npi() { "$UBCTL" npi set 0 npi "$1"; }
# Echoes of N sent to the peer that came back.
echoes() {
	"$UBCTL" ping -c "$1" -i 0.1 -W 1 -I 0 "$them" > /tmp/ub-iso-ping.out 2>&1
	grep -o '[0-9]* received' /tmp/ub-iso-ping.out | cut -d' ' -f1
}
# Forges COUNT packets with NPI towards vm0 port 0, from a third host.
forge_npi() { # NPI COUNT
	fabric forge vm0.0 --dst-tpn $NO_TPN --src 10.0.9.100 --dst "$me" --src-tpn 9 \
		--psn 0 --npi "$1" --count "$2"
	sleep 1
}
# Whether counter NAME grew by exactly WANT while CMD ran.
grows_by() { # NAME WANT CMD...
	name=$1 want=$2
	shift 2
	b=$(stat "$name")
	"$@"
	a=$(stat "$name")
	echo "# $name: $b -> $a (want +$want)"
	[ -n "$a" ] && [ -n "$b" ] && [ $((a - b)) -eq "$want" ]
}

t_config() { ub_configure; }
t_peer() { ub_peer_answers; }

t_other_partition() {
	npi 5 || return 1
	n=$(echoes 10)
	echo "# partition 5 -> 1: ${n:-?} of 10 echoes"
	npi 1 || return 1
	m=$(echoes 10)
	echo "# partition 1 -> 1: ${m:-?} of 10 echoes"
	[ "${n:-1}" -eq 0 ] && [ "${m:-0}" -eq 10 ]
}
t_forged_other_partition() { grows_by npi-drops 5 forge_npi 6 5; }
t_forged_own_partition() {
	grows_by npi-drops 0 forge_npi 1 5 &&
		grows_by unknown-channel 5 forge_npi 1 5 &&
		grows_by unknown-channel 5 forge_npi 0x1000001 5
}
t_low_low() {
	npi 0x1000001 || return 1
	n=$(echoes 10)
	echo "# 1 low -> 1 high: ${n:-?} of 10 echoes"
	grows_by npi-drops 5 forge_npi 0x1000001 5
	rc=$?
	npi 1
	[ $rc -eq 0 ] && [ "${n:-0}" -eq 10 ]
}
# The switch ports facing vm1 (both planes) put vm1 in partition 5 on the
# way in and give it partition 1 on the way out.
rewrite() { # INGRESS EGRESS
	fabric link vm1.0 --npi-ingress "$1" --npi-egress "$2"
	fabric link vm1.1 --npi-ingress "$1" --npi-egress "$2"
}
t_switch_rewrite() {
	npi 5 || return 1
	rewrite 5 1
	n=$(echoes 10)
	echo "# partition 5 -> 1 through rewriting switch ports: ${n:-?} of 10 echoes"
	rewrite 0 0
	m=$(echoes 10)
	echo "# rewrite off: ${m:-?} of 10 echoes"
	npi 1
	[ "${n:-0}" -eq 10 ] && [ "${m:-1}" -eq 0 ]
}
t_done() {
	"$UBTP" send --dev 0 --to "$them" --key $DONE_KEY --count 1 --sizes 1 \
		--timeout-ms 60000 > /tmp/ub-iso-done.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-iso-done.out
	return $rc
}
storm_recv() { # KEY OUT
	"$UBTP" recv --dev 0 --from "$them" --key "$1" --count $STORM_COUNT --sizes 4096 \
		--seed "$1" --timeout-ms 300000 --idle-timeout-ms 60000 > "$2" 2>&1
}
seconds_of() { sed -n 's/.*seconds \([0-9.]*\).*/\1/p' "$1" | head -n 1; }
t_storm() {
	storm_recv 991 /tmp/ub-iso-a.out
	rc=$?
	sed 's/^/# /' /tmp/ub-iso-a.out
	[ $rc -eq 0 ] || return 1
	before=$(ub_wrong_peer)
	storm_recv 992 /tmp/ub-iso-b.out &
	rcv=$!
	i=0
	until tpn=$(ub_channel_field 992 tpn); do
		i=$((i + 1))
		[ $i -le 600 ] || break
		sleep 0.05
	done
	if [ -n "$tpn" ]; then
		for k in 1 2 3 4 5; do
			ub_forge vm0 --dst-tpn "$tpn" --src 10.0.9.100 --psn-ahead 1 --count 1000
		done
	fi
	wait $rcv
	rc=$?
	sed 's/^/# /' /tmp/ub-iso-b.out
	after=$(ub_wrong_peer)
	a=$(seconds_of /tmp/ub-iso-a.out)
	b=$(seconds_of /tmp/ub-iso-b.out)
	echo "# $STORM_COUNT x 4 KiB: ${a:-?} s alone, ${b:-?} s under 5000 forged packets;" \
		"wrong-peer ${before:-?} -> ${after:-?}"
	[ -n "$tpn" ] || { echo "# channel 992 never in RTS with data"; return 1; }
	[ $rc -eq 0 ] && [ $((after - before)) -eq 5000 ] &&
		awk -v a="$a" -v b="$b" 'BEGIN { x = (b - a) / 5; printf "# %.2f ms more per forged packet (bound 2)\n", x; exit !(a > 0 && x <= 2) }'
}
t_streams() {
	for key in 991 992; do
		"$UBTP" send --dev 0 --to "$them" --key $key --count $STORM_COUNT --sizes 4096 \
			--seed $key --timeout-ms 300000 > /tmp/ub-iso-send.out 2>&1 || {
			sed 's/^/# /' /tmp/ub-iso-send.out
			return 1
		}
		sed 's/^/# /' /tmp/ub-iso-send.out
	done
}
t_serve() {
	"$UBTP" recv --dev 0 --from "$them" --key $DONE_KEY --count 1 --sizes 1 \
		--timeout-ms 300000 --idle-timeout-ms 300000 > /tmp/ub-iso-done.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-iso-done.out
	return $rc
}

if [ "$guest" = 0 ]; then
	ktap_set_plan 11
else
	ktap_set_plan 6
fi
ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "configure" t_config
ktap_test_result "the peer answers" t_peer
if [ "$guest" = 0 ]; then
	ktap_test_result "partitions 5 and 1 exchange no echo; 1 and 1 do" t_other_partition
	ktap_test_result "5 forged packets of another partition: npi-drops +5" t_forged_other_partition
	ktap_test_result "forged packets of the own partition pass the NPI check" t_forged_own_partition
	ktap_test_result "low and high talk; 5 forged low to low: npi-drops +5" t_low_low
	ktap_test_result "a switch rewriting NPIs at its edge joins partitions 5 and 1" t_switch_rewrite
	ktap_test_result "tell vm1 the cases are done" t_done
	ktap_test_result "5000 forged packets during a stream: all dropped, stream whole, at most 2 ms each" t_storm
else
	ktap_test_result "serve vm0's cases until it is done" t_serve
	ktap_test_result "stream twice to vm0 (the second under a forged storm)" t_streams
fi
ktap_test_result "rmmod ub" rmmod ub
ktap_finished
