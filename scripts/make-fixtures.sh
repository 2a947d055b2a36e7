#!/usr/bin/env bash
# Makes the MP3 test fixtures from synthesized audio (sox + lame), so no copyrighted or downloaded
# audio is ever needed. Deterministic: sox runs with -R, random bytes come from a seeded generator.
# Usage: scripts/make-fixtures.sh OUTDIR
set -euo pipefail
out=${1:?usage: make-fixtures.sh OUTDIR}
mkdir -p "$out"
cd "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Broadband "music": a sweep on the left, pink noise plus a chord on the right, 20 s.
sox -R -n -r 44100 -c 2 "$tmp/stereo44.wav" synth 20 sine 200-4000 pinknoise remix 1 2v0.5 gain -n -3
sox -R "$tmp/stereo44.wav" "$tmp/stereo44b.wav" synth 20 sine mix 523.25 gain -n -3
sox -R -n -r 22050 -c 1 "$tmp/mono22.wav" synth 15 sine 150-3000 gain -n -3
sox -R -n -r 24000 -c 2 "$tmp/stereo24.wav" synth 15 sine 300-2000 pinknoise gain -n -3
sox -R -n -r 11025 -c 1 "$tmp/mono11.wav" synth 8 sine 200-2000 gain -n -3

lame="lame --quiet --noreplaygain"
$lame -b 128 "$tmp/stereo44b.wav" cbr.mp3                                  # MPEG-1 CBR, Info tag
$lame -V 2 "$tmp/stereo44b.wav" vbr.mp3                                    # MPEG-1 VBR, Xing tag
$lame -b 48 "$tmp/mono22.wav" mono22.mp3                                   # MPEG-2 mono 22.05 kHz
$lame -b 64 "$tmp/stereo24.wav" mpeg2.mp3                                  # MPEG-2 stereo 24 kHz
$lame -b 32 "$tmp/mono11.wav" mpeg25.mp3                                   # MPEG-2.5 mono 11.025 kHz
$lame -b 160 -t "$tmp/stereo44b.wav" noxing.mp3                            # no Xing/Info: no gapless data

sox -R -n -r 8000 -c 1 "$tmp/short.wav" synth 1 sine 440
sox "$tmp/short.wav" -n spectrogram -r -x 100 -y 65 -o "$tmp/cover.png"
$lame -b 96 --add-id3v2 --tt "Fixture Title" --ta "Fixture Artist" --tl "Fixture Album" \
  --ti "$tmp/cover.png" "$tmp/stereo24.wav" id3v2.mp3                      # ID3v2 with a picture + ID3v1

# Bad input.
: > empty.mp3
python3 -c 'import random,sys; r=random.Random(7); sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(200000)))' > random.mp3
cp "$tmp/cover.png" image.mp3
# An ID3v2 header claiming 256 MB (synchsafe 0x7f7f7f7f) in front of a few bytes.
python3 -c 'import sys; sys.stdout.buffer.write(b"ID3\x04\x00\x00\x7f\x7f\x7f\x7f" + b"\x00"*1000)' > id3huge.mp3
size=$(stat -c %s cbr.mp3)
head -c $((size / 2)) cbr.mp3 > truncated.mp3
# 3000 bytes of junk (with fake sync words) spliced in at a third of the file.
python3 - "$size" <<'PY'
import random, sys
size = int(sys.argv[1]); data = open("cbr.mp3", "rb").read(); r = random.Random(11)
junk = bytearray(r.getrandbits(8) for _ in range(3000))
for i in range(0, 3000, 97): junk[i] = 0xFF; junk[i + 1] = 0xFB
cut = size // 3
open("garbage.mp3", "wb").write(data[:cut] + bytes(junk) + data[cut:])
PY
mkdir -p directory.mp3
