#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# ub.ko binds the UB controller (the PCIe function ub-fabric emulates over
# vfio-user), reads its identification registers through BAR0 (shown in
# debugfs, cross-checked with the IDs in sysfs), receives the MSI-X
# interrupt the device's GINT_TEST register provokes, and releases
# everything on rmmod (driver link, MSI-X vectors, IRQs, BAR region,
# debugfs), and binds again after a reload.
#
# Skips (exit 4) when no UB controller is present: the guests of
# scripts/test without a vfio-user device run it too.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

MODULE=${UB_MODULE:-/lib/modules/ub.ko}
# From drivers/ub/proto/src/controller/mod.rs (Documentation/ub/controller.rst).
VENDOR=0x19e5
DEVICE=0xd0b1
CLASS=0x0c8000
SUBSYS_DEVICE=0x0001
IDENT=0x31434255
DEBUGFS=/sys/kernel/debug/ub

ktap_print_header

dev=
for d in /sys/bus/pci/devices/*; do
	[ -r "$d/vendor" ] || continue
	if [ "$(cat "$d/vendor")" = $VENDOR ] && [ "$(cat "$d/device")" = $DEVICE ]; then
		dev=$d
		break
	fi
done
if [ -z "$dev" ]; then
	ktap_skip_all "no UB controller ($VENDOR:$DEVICE) in /sys/bus/pci/devices"
	exit "$KSFT_SKIP"
fi
if [ ! -f "$MODULE" ]; then
	ktap_skip_all "no module at $MODULE"
	exit "$KSFT_SKIP"
fi
if [ -d /sys/module/ub ]; then
	ktap_skip_all "ub is already loaded"
	exit "$KSFT_SKIP"
fi
name=$(basename "$dev")
dbg=$DEBUGFS/$name
ktap_print_msg "UB controller at $name"

ktap_set_plan 14

bound_to_ub() {
	[ -L "$dev/driver" ] && [ "$(basename "$(readlink "$dev/driver")")" = ub ]
}

sysfs_ids() {
	for f in vendor:$VENDOR device:$DEVICE class:$CLASS subsystem_vendor:$VENDOR \
		subsystem_device:$SUBSYS_DEVICE; do
		v=$(cat "$dev/${f%%:*}")
		echo "# sysfs ${f%%:*} $v"
		[ "$v" = "${f#*:}" ] || return 1
	done
}

ident_ok() {
	v=$(cat "$dbg/ident") || return 1
	echo "# IDENT $v"
	[ "$v" = $IDENT ]
}

version_ok() {
	v=$(cat "$dbg/version") || return 1
	echo "# VERSION $v"
	case "$v" in 0x0001????) return 0 ;; *) return 1 ;; esac
}

cap() {
	sed -n "s/^$1 //p" "$dbg/caps"
}

caps_ok() {
	sed 's/^/# caps: /' "$dbg/caps"
	ports=$(cap ports)
	vectors=$(cap msix_vectors)
	[ -n "$ports" ] && [ "$ports" -ge 1 ] && [ "$ports" -le 8 ] &&
		[ "$vectors" = $((ports + 1)) ] && [ "$(cap ident)" = $IDENT ]
}

# The PCI core lists the allocated MSI-X vectors in sysfs, and
# /proc/interrupts names their handlers.
msix_allocated() {
	n=$(ls "$dev/msi_irqs" 2>/dev/null | wc -l)
	echo "# $n MSI-X vectors in $dev/msi_irqs"
	[ "$n" = "$(cap msix_vectors)" ] && grep -q 'ub-global' /proc/interrupts
}

# Count of the vector-0 handler (debugfs irq_counts: vector name irq count).
vec0_count() {
	awk '$1 == 0 { print $4 }' "$dbg/irq_counts"
}

test_causes() {
	sed -n 's/^test //p' "$dbg/global_causes"
}

# /proc/interrupts: total over the CPUs of the line of IRQ $1.
proc_irq_count() {
	awk -v irq="$1:" '$1 == irq { s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; print s }' \
		/proc/interrupts
}

# Writes irq_test and waits (up to 5 s) for the vector-0 count to grow.
trigger_once() {
	before=$(vec0_count)
	echo 1 > "$dbg/irq_test" || return 1
	i=0
	while [ "$(vec0_count)" -le "$before" ]; do
		i=$((i + 1))
		[ $i -le 50 ] || return 1
		sleep 0.1
	done
}

msix_interrupt() {
	irq=$(awk '$1 == 0 { print $3 }' "$dbg/irq_counts")
	c0=$(vec0_count)
	t0=$(test_causes)
	p0=$(proc_irq_count "$irq")
	for _ in 1 2 3; do
		trigger_once || { echo "# no interrupt on vector 0"; return 1; }
	done
	c1=$(vec0_count)
	t1=$(test_causes)
	p1=$(proc_irq_count "$irq")
	echo "# vector 0 (irq $irq): handler count $c0 -> $c1, TEST causes $t0 -> $t1," \
		"/proc/interrupts $p0 -> $p1"
	sed 's/^/# irq_counts: /' "$dbg/irq_counts"
	[ "$t1" -eq $((t0 + 3)) ] && [ "$c1" -ge $((c0 + 3)) ] && [ "$p1" -ge $((p0 + 3)) ]
}

bad_write_rejected() {
	! echo 7 > "$dbg/irq_test" 2>/dev/null
}

released() {
	[ ! -e "$dev/driver" ] || { echo "# still bound"; return 1; }
	[ ! -d "$dev/msi_irqs" ] || [ -z "$(ls "$dev/msi_irqs")" ] ||
		{ echo "# MSI-X vectors still allocated"; return 1; }
	! grep -q 'ub-global\|ub-port' /proc/interrupts || { echo "# IRQ handlers left"; return 1; }
	! grep -q ': ub$' /proc/iomem || { echo "# BAR0 region still requested"; return 1; }
	[ ! -e "$DEBUGFS" ] || { echo "# $DEBUGFS left behind"; return 1; }
	[ ! -e /sys/module/ub ]
}

bar_requested() {
	line=$(grep ': ub$' /proc/iomem) || return 1
	echo "# /proc/iomem:$line"
}

rebind() {
	insmod "$MODULE" && bound_to_ub && ident_ok && trigger_once && rmmod ub && released
}

ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "$name is bound to the ub driver" bound_to_ub
ktap_test_result "sysfs vendor, device, class and subsystem IDs" sysfs_ids
ktap_test_result "debugfs directory $dbg" test -d "$dbg"
ktap_test_result "IDENT read through BAR0 is \"UBC1\"" ident_ok
ktap_test_result "VERSION major is 1" version_ok
ktap_test_result "capabilities are consistent" caps_ok
ktap_test_result "MSI-X vectors allocated and named" msix_allocated
ktap_test_result "GINT_TEST raises MSI-X vector 0" msix_interrupt
ktap_test_result "irq_test rejects anything but 1" bad_write_rejected
ktap_test_result "BAR0 region requested as ub" bar_requested
ktap_test_result "rmmod ub" rmmod ub
ktap_test_result "unbind released everything" released
ktap_test_result "binds again after a reload" rebind

ktap_finished
