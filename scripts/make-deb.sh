#!/usr/bin/env bash
# Builds partycast-listener and partycast-broadcaster .debs for this machine's architecture from the
# release binaries in BIN_DIR, into OUT_DIR: stripped programs, systemd units, /etc/default files,
# Depends from dpkg-shlibdeps. `make deb` runs it; so does PackagingTests, into a scratch directory.
# Usage: scripts/make-deb.sh BIN_DIR OUT_DIR  (DEB_VERSION overrides the version taken from git;
# DPKG_DEB_OPTIONS adds options to dpkg-deb --build, such as its compression)
set -euo pipefail
shopt -s inherit_errexit
[ $# -eq 2 ] || { echo "usage: $0 BIN_DIR OUT_DIR" >&2; exit 2; }
bin=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
repo=$(cd "$(dirname "$0")/.." && pwd)
packaging="$repo/packaging"
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# v1.2.0-5-gabc1234 → 1.2.0+git5.abc1234; no tag → 0.0.0+git<commits>.<sha>, which rises with each commit.
version_from_git() {
    local described
    if described=$(git -C "$repo" describe --tags --match 'v[0-9]*' 2>/dev/null); then
        sed -E 's/^v//; s/-([0-9]+)-g([0-9a-f]+)$/+git\1.\2/' <<<"$described"
    else
        echo "0.0.0+git$(git -C "$repo" rev-list --count HEAD).$(git -C "$repo" rev-parse --short HEAD)"
    fi
}
version=${DEB_VERSION:-$(version_from_git)}
maintainer=${DEB_MAINTAINER:-$(git -C "$repo" log -1 --format='%an <%ae>')}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The packages providing the libraries a binary links (dpkg-shlibdeps, from their shlibs/symbols
# files) and those it opens itself at first use: the sonames written in the binary (libasound.so.2 …),
# each to the package that holds it here.
depends_of() {
    local binary=$1 linked needed opened=() soname path file package
    mkdir -p "$work/shlibs/debian"
    printf 'Source: partycast\n\nPackage: partycast\nArchitecture: any\n' >"$work/shlibs/debian/control"
    linked=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$binary" 2>"$work/shlibs/warnings") \
        || { cat "$work/shlibs/warnings" >&2; return 1; }
    linked=${linked#shlibs:Depends=}
    needed=$(objdump -p "$binary" | awk '$1 == "NEEDED" { print $2 }')
    for soname in $(strings -a "$binary" | grep -E '^lib[A-Za-z0-9_+-]+\.so\.[0-9]+$' | sort -u); do
        grep -qxF "$soname" <<<"$needed" && continue
        path=/usr/lib/$multiarch/$soname
        [ -e "$path" ] || { echo "$binary opens $soname, which is not in /usr/lib/$multiarch" >&2; return 1; }
        # dpkg records /lib/… or /usr/lib/… as the package spelled it: matched by the file's own name.
        file=$multiarch/$(basename "$(realpath "$path")")
        package=$(dpkg-query -S "$file" | awk -v file="/$file" 'substr($2, length($2) - length(file) + 1) == file { sub(/:.*/, "", $1); print $1; exit }')
        [ -n "$package" ] || { echo "no package holds $file" >&2; return 1; }
        opened+=("$package")
    done
    # A package both linked (with its least version) and opened is named once, with the version.
    { tr ',' '\n' <<<"$linked" | sed 's/^ *//'; printf '%s\n' "${opened[@]}"; } | sed '/^$/d' | awk '!seen[$1]++' | sort \
        | paste -sd, | sed 's/,/, /g'
}

# Maintainer scripts as dh_installsystemd writes them: enable (and start) on install when asked,
# restart on upgrade, stop on removal, forget on purge. The helpers' failures do not fail the
# package's installation (a system without systemd has nothing to enable), as in Debian's own.
maintainer_scripts() {
    local debian=$1 unit=$2 start=$3
    {
        echo '#!/bin/sh'
        echo 'set -e'
        echo 'if [ "$1" = configure ] || [ "$1" = abort-upgrade ] || [ "$1" = abort-deconfigure ] || [ "$1" = abort-remove ]; then'
        echo "    deb-systemd-helper unmask $unit >/dev/null || true"
        if [ "$start" = yes ]; then
            echo "    if deb-systemd-helper --quiet was-enabled $unit; then deb-systemd-helper enable $unit >/dev/null || true"
            echo "    else deb-systemd-helper update-state $unit >/dev/null || true; fi"
        else
            echo "    deb-systemd-helper update-state $unit >/dev/null || true"
        fi
        echo '    if [ -d /run/systemd/system ]; then'
        echo '        systemctl --system daemon-reload >/dev/null || true'
        if [ "$start" = yes ]; then
            echo "        if [ -n \"\$2\" ]; then deb-systemd-invoke restart $unit >/dev/null || true"
            echo "        else deb-systemd-invoke start $unit >/dev/null || true; fi"
        else
            echo "        deb-systemd-invoke try-restart $unit >/dev/null || true"
        fi
        echo '    fi'
        echo 'fi'
    } >"$debian/postinst"
    cat >"$debian/prerm" <<EOF
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "\$1" = remove ]; then deb-systemd-invoke stop $unit >/dev/null || true; fi
EOF
    cat >"$debian/postrm" <<EOF
#!/bin/sh
set -e
if [ "\$1" = remove ] && [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true; fi
if [ "\$1" = remove ] && [ -x /usr/bin/deb-systemd-helper ]; then deb-systemd-helper mask $unit >/dev/null || true; fi
if [ "\$1" = purge ] && [ -x /usr/bin/deb-systemd-helper ]; then
    deb-systemd-helper purge $unit >/dev/null || true
    deb-systemd-helper unmask $unit >/dev/null || true
fi
EOF
    chmod 755 "$debian/postinst" "$debian/prerm" "$debian/postrm"
}

# build PROGRAM START RECOMMENDS DESCRIPTION: partycast-PROGRAM_VERSION_ARCH.deb in OUT_DIR.
build() {
    local program=$1 start=$2 recommends=$3 description=$4 package="partycast-$1"
    local root="$work/$package" libexec="usr/lib/partycast"
    mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/$libexec" "$root/lib/systemd/system" "$root/etc/default" "$root/etc/partycast"
    # The program lives beside its SwiftPM resource bundles (found next to the executable's real path).
    install -m 755 "$bin/$program" "$root/$libexec/$program"
    strip --strip-all --remove-section=.comment "$root/$libexec/$program"
    ln -s "../lib/partycast/$program" "$root/usr/bin/$program"
    local bundle
    for bundle in $(resource_bundles "$program"); do cp -r "$bin/$bundle" "$root/$libexec/"; done
    install -m 644 "$packaging/$package.service" "$root/lib/systemd/system/$package.service"
    install -m 644 "$packaging/$package.default" "$root/etc/default/$package"
    # The key file systemd loads as the credential: empty (a public party) until root writes a key in.
    install -m 600 /dev/null "$root/etc/partycast/$program.key"
    printf '/etc/default/%s\n/etc/partycast/%s.key\n' "$package" "$program" >"$root/DEBIAN/conffiles"
    maintainer_scripts "$root/DEBIAN" "$package.service" "$start"
    local depends
    depends=$(depends_of "$root/$libexec/$program")
    cat >"$root/DEBIAN/control" <<EOF
Package: $package
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Recommends: $recommends
Section: sound
Priority: optional
Description: $description
EOF
    (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | xargs -0 md5sum >DEBIAN/md5sums)
    # shellcheck disable=SC2086 # DPKG_DEB_OPTIONS is a list of options (the tests pass "-Zgzip -z1":
    # xz takes minutes over the broadcaster's static Foundation).
    dpkg-deb --root-owner-group ${DPKG_DEB_OPTIONS:-} --build "$root" "$out/${package}_${version}_${arch}.deb" >/dev/null
    echo "$out/${package}_${version}_${arch}.deb"
}

# The SwiftPM resource bundles a program needs: those its binary names (Bundle.module's lookup).
resource_bundles() {
    local name
    for name in $(cd "$bin" && ls -d ./*.resources 2>/dev/null); do
        name=${name#./}
        if grep -qF "$name" "$bin/$1"; then echo "$name"; fi
    done
}

build listener yes avahi-daemon "PartyCast listener: plays the party on this machine's speakers
 Joins a PartyCast broadcaster on the LAN (found by mDNS, or by address) and plays
 what it streams, in step with every other listener. The partycast-listener
 service joins the party /etc/default/partycast-listener names on every boot."
# node-elliptic: the P-256 the remote page proves a private party's key with (served from /usr/share/nodejs).
build broadcaster no "avahi-daemon, node-elliptic" "PartyCast broadcaster: shares music with every listener on the LAN
 Streams audio files, a music folder, internet radio or mpd's output (through a
 FIFO) to every PartyCast listener that joins, with a web remote. The
 partycast-broadcaster service plays what /etc/default/partycast-broadcaster
 names; it is installed disabled."
