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

# Other formats, each from the same synthesized audio by Debian's reference encoder; tags as each
# encoder writes them. The tests decode them again with the reference decoders.
tag_title="Fixture Title"; tag_artist="Fixture Artist"; tag_album="Fixture Album"
sox -R "$tmp/stereo44.wav" -b 16 "$tmp/music16.wav"   # 16-bit: what every encoder reads
flac --silent -f --tag="TITLE=$tag_title" --tag="ARTIST=$tag_artist" --tag="ALBUM=$tag_album" -o tone.flac "$tmp/music16.wav"
sox -R -n -r 48000 -c 1 -b 24 -t wavpcm "$tmp/mono48-24.wav" synth 6 sine 100-8000 gain -n -1
flac --silent -f -o mono24.flac "$tmp/mono48-24.wav"
oggenc -Q -q 5 -t "$tag_title" -a "$tag_artist" -l "$tag_album" -o tone.ogg "$tmp/music16.wav"
opusenc --quiet --bitrate 128 --title "$tag_title" --artist "$tag_artist" --album "$tag_album" "$tmp/music16.wav" tone.opus
ffmpeg -nostdin -v error -y -i "$tmp/music16.wav" -c:a aac -b:a 160k -f adts tone.aac            # AAC-LC, 44.1 kHz stereo
# Without noise substitution (PNS draws on a random generator that runs through the whole stream,
# so only a decode from the start reproduces it): what exact seeking and resyncing are judged on.
ffmpeg -nostdin -v error -y -i "$tmp/music16.wav" -c:a aac -b:a 160k -aac_pns 0 -f adts nopns.aac
ffmpeg -nostdin -v error -y -i "$tmp/mono22.wav" -c:a aac -b:a 48k -f adts mono22.aac             # libfaad2 doubles ≤ 24 kHz
ffmpeg -nostdin -v error -y -i "$tmp/stereo24.wav" -c:a aac -b:a 64k -metadata title="$tag_title" \
  -metadata artist="$tag_artist" -metadata album="$tag_album" -f adts -write_id3v2 1 id3.aac      # ID3v2 before ADTS
# WAV in every sample format the decoder reads (sox writes WAVE_FORMAT_EXTENSIBLE past 16 bits).
sox -R "$tmp/stereo44.wav" -b 8 -e unsigned-integer pcm8.wav
sox -R "$tmp/stereo44.wav" -b 16 pcm16.wav
sox -R "$tmp/stereo44.wav" -b 24 pcm24.wav
sox -R "$tmp/stereo44.wav" -b 32 pcm32.wav
sox -R "$tmp/stereo44.wav" -e floating-point -b 32 float32.wav
sox -R "$tmp/stereo44.wav" -e floating-point -b 64 float64.wav
# What other writers do: an odd-sized chunk (padded) and LIST/INFO tags before the data; a
# streaming writer's data size of 0xFFFFFFFF; RF64.
python3 - "$tag_title" "$tag_artist" "$tag_album" <<'PY'
import struct, sys
data = open("pcm16.wav", "rb").read()
fmt_at = data.index(b"fmt "); fmt = data[fmt_at:fmt_at + 8 + struct.unpack("<I", data[fmt_at + 4:fmt_at + 8])[0]]
data_at = data.index(b"data"); pcm = data[data_at + 8:]
def chunk(tag, body): return tag + struct.pack("<I", len(body)) + body + (b"\0" if len(body) % 2 else b"")
info = b"INFO" + b"".join(chunk(k, v.encode() + b"\0") for k, v in zip([b"INAM", b"IART", b"IPRD"], sys.argv[1:4]))
body = b"WAVE" + chunk(b"odd ", b"abc") + fmt + chunk(b"LIST", info) + chunk(b"data", pcm)
open("tagged.wav", "wb").write(b"RIFF" + struct.pack("<I", len(body)) + body)
open("streamed.wav", "wb").write(b"RIFF\xff\xff\xff\xffWAVE" + fmt + b"data\xff\xff\xff\xff" + pcm)
ds64 = chunk(b"ds64", struct.pack("<QQQI", 0, len(pcm), 0, 0))
open("rf64.wav", "wb").write(b"RF64\xff\xff\xff\xffWAVE" + ds64 + fmt + b"data\xff\xff\xff\xff" + pcm)
PY

# Hostile versions: truncated, garbage inside, random bytes after a valid start, absurd headers.
for f in tone.flac tone.ogg tone.opus tone.aac pcm16.wav; do
  size=$(stat -c %s "$f"); head -c $((size / 2)) "$f" > "truncated-$f"
done
python3 <<'PY'
import random, struct, zlib
r = random.Random(13)
def rand(n): return bytes(r.getrandbits(8) for _ in range(n))
aac = open("nopns.aac", "rb").read()
# 5000 bytes of junk with fake ADTS sync words, spliced mid-frame at a third of the stream.
junk = bytearray(rand(5000))
for i in range(0, 5000, 89): junk[i:i + 2] = b"\xff\xf1"
cut = len(aac) // 3
open("garbage.aac", "wb").write(aac[:cut] + bytes(junk) + aac[cut:])
# Valid magic (and for Ogg a valid first page, for ADTS three good frames), then noise.
ogg_first_page = lambda d: d[:27 + d[26] + sum(d[27:27 + d[26]])]
open("random-after-magic.flac", "wb").write(b"fLaC" + rand(100000))
open("random-after-magic.ogg", "wb").write(ogg_first_page(open("tone.ogg", "rb").read()) + rand(100000))
open("random-after-magic.opus", "wb").write(ogg_first_page(open("tone.opus", "rb").read()) + rand(100000))
open("random-after-magic.wav", "wb").write(b"RIFF\0\0\0\0WAVE" + rand(100000))
frames, p = b"", 0
for _ in range(3):
    n = (aac[p + 3] & 3) << 11 | aac[p + 4] << 3 | aac[p + 5] >> 5; frames += aac[p:p + n]; p += n
open("random-after-magic.aac", "wb").write(frames + rand(100000))
# FLAC: a VORBIS_COMMENT block of 16 MiB claiming 2^32-1 comments, in a 200-byte file.
flac = open("tone.flac", "rb").read()
streaminfo = flac[4:4 + 4 + 34]
absurd = b"\x84\xff\xff\xff" + struct.pack("<I", 0xFFFFFFF0) + b"x" * 12 + struct.pack("<I", 0xFFFFFFFF)
open("absurd.flac", "wb").write(b"fLaC" + bytes([streaminfo[0] & 0x7f]) + streaminfo[1:] + absurd + rand(100))
# Ogg Opus: valid OpusHead, then an OpusTags page whose vendor string claims 2 GiB (CRCs correct).
def crc(data):
    c = 0
    for b in data:
        c ^= b << 24
        for _ in range(8): c = ((c << 1) ^ 0x04C11DB7 if c & 0x80000000 else c << 1) & 0xFFFFFFFF
    return c
def page(serial, seq, flags, packet):
    segs = [255] * (len(packet) // 255) + [len(packet) % 255]
    h = b"OggS\0" + bytes([flags]) + struct.pack("<qII", 0, serial, seq) + b"\0\0\0\0" + bytes([len(segs)]) + bytes(segs)
    p = h + packet
    return p[:22] + struct.pack("<I", crc(p)) + p[26:]
head = b"OpusHead\x01\x02" + struct.pack("<HIhB", 312, 48000, 0, 0)
tags = b"OpusTags" + struct.pack("<I", 0x7FFFFFFF) + b"vendor" + rand(64)
open("absurd.opus", "wb").write(page(7, 0, 2, head) + page(7, 1, 0, tags) + rand(4000))
# WAV: a fmt of 65535 channels at 4 GHz, and a LIST chunk claiming 4 GiB before it.
open("absurd.wav", "wb").write(b"RIFF\xff\xff\xff\xffWAVE" + b"fmt " + struct.pack("<IHHIIHH", 16, 1, 65535, 0xFFFFFFFF, 0, 0, 16)
                               + b"data" + struct.pack("<I", 0xFFFFFFFF) + rand(1000))
open("absurd-list.wav", "wb").write(b"RIFF\xff\xff\xff\xffWAVE" + b"LIST\xff\xff\xff\xff" + rand(1000))
open("page.html.mp3", "wb").write(b"<!DOCTYPE html>\n<html><head><title>Not Found</title></head><body>404</body></html>\n" * 20)
PY
