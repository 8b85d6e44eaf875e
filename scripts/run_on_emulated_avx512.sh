#!/usr/bin/env bash
# Runs a static x86-64 Linux program on an emulated CPU with AVX-512 and AVX512-VNNI (Bochs's Tiger Lake model),
# on any x86-64 Debian machine: the matmul kernels that only such CPUs compile in can be checked for their bits on
# a machine with AVX2 alone. It is slow (a boot takes about 40 s, then some 40 million instructions a second) and
# has no AMX. Usage:
#   scripts/run_on_emulated_avx512.sh [-f FILE]... PROGRAM [ARGS...]
# PROGRAM and each FILE are copied into the guest's /work, where PROGRAM runs; its stdout and stderr come back to
# this process's, and its exit status is this script's (124: timed out, 125: the guest did not boot or finish).
# "guest:/bin/sh" as PROGRAM runs busybox's shell (a script among the FILEs, say). Debian's bochs, a kernel
# and the boot files are installed or fetched on the first run (apt), into $NEWRLLAMA_CACHE/emulated-avx512.
set -euo pipefail

CACHE="${NEWRLLAMA_CACHE:-$HOME/.cache/newrllama}/emulated-avx512"
TIMEOUT_S="${EMULATED_TIMEOUT_S:-3600}"
FILES=()
while [ $# -gt 0 ] && [ "$1" = "-f" ]; do FILES+=("$2"); shift 2; done
[ $# -ge 1 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
PROGRAM=$1; shift

prepare() {
    local packages=(bochs bochsbios vgabios busybox-static isolinux syslinux-common xorriso cpio)
    if ! dpkg -s "${packages[@]}" >/dev/null 2>&1; then
        apt-get install -y -q --no-install-recommends "${packages[@]}" >&2
    fi
    [ -f "$CACHE/vmlinuz" ] && return
    mkdir -p "$CACHE"
    local tmp; tmp=$(mktemp -d)
    local kernel; kernel=$(apt-cache depends linux-image-cloud-amd64 | sed -n 's/.*Depends: \(linux-image-[^ ]*\)/\1/p' | head -1)
    (cd "$tmp" && apt-get download -q "$kernel" >&2 && dpkg-deb -x ./*.deb x)
    cp "$tmp"/x/boot/vmlinuz-* "$CACHE/vmlinuz"
    rm -rf "$tmp"
}
prepare

WORK=$(mktemp -d)
BOCHS=""
trap '[ -n "$BOCHS" ] && kill "$BOCHS" 2>/dev/null; rm -rf "$WORK"' EXIT

# The guest: busybox, the program and its files, and an init that runs it with its streams on two serial ports.
ROOT=$WORK/root
mkdir -p "$ROOT"/{bin,proc,sys,dev,tmp,work}
cp /bin/busybox "$ROOT/bin/busybox"
if [[ "$PROGRAM" == guest:* ]]; then
    GUEST_PROGRAM=${PROGRAM#guest:}
else
    GUEST_PROGRAM=/work/$(basename "$PROGRAM")
    cp "$PROGRAM" "$ROOT$GUEST_PROGRAM"
fi
for f in ${FILES[@]+"${FILES[@]}"}; do cp -r "$f" "$ROOT/work/"; done
COMMAND=$(printf '%q ' "$GUEST_PROGRAM" "$@")
cat > "$ROOT/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/work
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
stty -F /dev/ttyS1 115200 raw -echo; stty -F /dev/ttyS2 115200 raw -echo
cd /work
$COMMAND </dev/null >/dev/ttyS1 2>/dev/ttyS2
echo "@@exit=\$?@@" > /dev/ttyS0
poweroff -f
EOF
chmod +x "$ROOT/init"
mkdir -p "$WORK/iso"
(cd "$ROOT" && find . | cpio -o -H newc --quiet) > "$WORK/iso/initrd.img"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$CACHE/vmlinuz" "$WORK/iso/"
# Bochs 2.7 reports a wrong size for the compacted XSAVE area and fast short string moves that its MSR leaves
# off: Linux then turns AVX off or hangs at boot. The kernel is told not to use those features; the program still
# sees the model's CPUID.
cat > "$WORK/iso/isolinux.cfg" <<EOF
default linux
prompt 0
label linux
  kernel /vmlinuz
  append initrd=/initrd.img console=ttyS0,115200 quiet loglevel=3 clearcpuid=pku,xsaves,xsavec,fsrm,aperfmperf mitigations=off nokaslr panic=-1 nowatchdog tsc=reliable no_timer_check rdinit=/init
EOF
xorriso -as mkisofs -quiet -o "$WORK/boot.iso" -b isolinux.bin -c boot.cat -no-emul-boot -boot-load-size 4 \
    -boot-info-table "$WORK/iso" 2>/dev/null

# Debian's build has no display-less library (rfb without a client is the quiet one), starts in its debugger
# (the rc file continues) and crashes in its sound thread unless sound is off.
echo c > "$WORK/continue.rc"
cat > "$WORK/bochsrc" <<EOF
memory: guest=2048, host=2048
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/bochs/VGABIOS-lgpl-latest
cpu: model=tigerlake, count=1, ips=100000000, reset_on_triple_fault=0
clock: sync=none, time0=local
pci: enabled=1, chipset=i440fx
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=cdrom, path=$WORK/boot.iso, status=inserted
boot: cdrom
display_library: rfb, options="timeout=0"
mouse: enabled=0
speaker: enabled=0
sound: driver=dummy
com1: enabled=1, mode=file, dev=$WORK/console.txt
com2: enabled=1, mode=file, dev=$WORK/stdout.bin
com3: enabled=1, mode=file, dev=$WORK/stderr.bin
log: $WORK/bochs.log
panic: action=fatal
error: action=report, cpu0=ignore
info: action=ignore
debug: action=ignore
EOF
: > "$WORK/console.txt"
bochs-bin -q -f "$WORK/bochsrc" -rc "$WORK/continue.rc" </dev/null >"$WORK/bochs.out" 2>&1 &
BOCHS=$!
DEADLINE=$(( $(date +%s) + TIMEOUT_S ))
TIMED_OUT=0
# The guest powers off after its status line; Bochs may stay up, or be gone before the next look.
while kill -0 "$BOCHS" 2>/dev/null && ! grep -aq -e '@@exit=' -e 'Kernel panic' "$WORK/console.txt"; do
    if [ "$(date +%s)" -ge "$DEADLINE" ]; then TIMED_OUT=1; break; fi
    sleep 0.5
done
sleep 1  # the serial ports' last bytes
kill "$BOCHS" 2>/dev/null || true
wait "$BOCHS" 2>/dev/null || true
BOCHS=""
STATUS=$(grep -ao '@@exit=[0-9]*' "$WORK/console.txt" | head -1 | tr -dc 0-9 || true)
[ -n "$STATUS" ] || STATUS=$([ "$TIMED_OUT" = 1 ] && echo 124 || echo 125)
cat "$WORK/stdout.bin" 2>/dev/null || true
cat "$WORK/stderr.bin" >&2 2>/dev/null || true
if [ "$STATUS" = 125 ]; then
    echo "run_on_emulated_avx512: the guest did not finish; its console's last lines:" >&2
    tail -n 20 "$WORK/console.txt" | tr -d '\r' >&2
fi
exit "$STATUS"
