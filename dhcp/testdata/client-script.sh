#!/bin/sh
# The configuration script of the DHCP clients under test (ISC dhclient's
# -sf, busybox udhcpc's -s, dhcpcd's --script), run inside the test's
# namespace: it records the environment the client gives it in
# $GONET_DHCP_DIR/env.EVENT and configures the interface from the lease as
# the distributions' scripts do (address and mask, MTU, default route),
# touching nothing else: no resolv.conf, no hostname.
#
# dhclient and dhcpcd name the event in $reason and the lease in new_*;
# udhcpc names the event in $1 and the lease in ip, subnet, router, mtu.
dir=${GONET_DHCP_DIR:?GONET_DHCP_DIR is not set}
event=${reason:-$1}
# Written whole, then renamed: the test reads it as soon as it appears.
env | sort >"$dir/env.$event.new" && mv "$dir/env.$event.new" "$dir/env.$event"

case $event in
PREINIT | deconfig)
	ip link set dev "$interface" up
	;;
BOUND | RENEW | REBIND | REBOOT | bound | renew)
	addr=${new_ip_address:-$ip}
	mask=${new_subnet_mask:-$subnet}
	routers=${new_routers:-$router}
	mtu=${new_interface_mtu:-$mtu}
	if [ -n "$mtu" ]; then
		ip link set dev "$interface" mtu "$mtu" || exit 1
	fi
	ip addr replace "$addr/$mask" dev "$interface" || exit 1
	for r in $routers; do
		ip route replace default via "$r" dev "$interface" || exit 1
		break
	done
	;;
esac
exit 0
