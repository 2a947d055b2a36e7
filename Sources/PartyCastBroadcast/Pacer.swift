import Logging
import PartyCastCodec
import PartyCastControlSeam
import PartyCastCore
import PartyCastDSP
import PartyCastSources
import PartyCastWire

/// What every chunk of the broadcast carries.
struct ChunkFormat {
    var format: AudioFormat
    var framesPerChunk: Int
    var preSkip: Int
}

/// The pacer: the one thread that sends. It decodes and encodes the queue chunk by chunk, sends each
/// chunk `leadMilliseconds` before it is heard, and applies the remotes' commands between chunks.
extension Party {
    /// Streams the queue until its end (true) or `stop()` (false).
    public func run() throws(PartyCastError) -> Bool {
        defer {
            // From now on every command hears that the party is over, those waiting included.
            let waiting = inbox.withLockedValue { queue in
                stopRequested.store(true, ordering: .releasing)
                defer { queue.removeAll() }
                return queue
            }
            for (_, reply) in waiting { reply(.failure(PartyCommandError(.invalid, "the party is over"))) }
        }
        guard try start() else { return false }
        while !stopRequested.load(ordering: .acquiring) {
            applyCommands()
            if gateStart() {
                // Held for the clocks: woken by the listeners' reports, a command or the deadline.
                sleep(until: .max)
                continue
            }
            if state.timeline.paused {
                // Nothing changes until a command comes: no wakeups meanwhile.
                wakeup.wait(nanoseconds: 3_600_000_000_000)
                continue
            }
            if state.reachedEnd {
                // The last chunk has gone out: wait for it to be heard (or for a command that adds more).
                let end = state.timeline.presentationTime(ofFrame: state.timeline.end)
                if now() >= end { break }
                sleep(until: end)
                continue
            }
            // What falls due within the batch window goes out together, so each listener gets one
            // write per window rather than per chunk. Woken early by a command, the loop starts over:
            // the command may change what the next chunk holds.
            let due = nextChunkDue
            if due > now() + Self.batchWindowNanoseconds {
                fanout.flushChunks()
                pruneHeard()
                sleep(until: due)
                continue
            }
            try sendNextChunk()
        }
        guard !stopRequested.load(ordering: .acquiring) else { return false }
        published.withLockedValue { $0.view.ended = true; $0.pausedAt = nil; $0.segments = [] }
        republish()
        return true
    }

    /// Sleeps until `deadline`, or the start gate's if sooner (StartGate.swift), or a command.
    private func sleep(until deadline: UInt64) {
        let wake = min(deadline, startGateDue ?? .max)
        wakeup.wait(nanoseconds: wake - min(wake, now()))
    }

    /// Sets the timeline's origin `startInSeconds` from now and opens the first item that plays;
    /// false when stopped meanwhile.
    func start() throws(PartyCastError) -> Bool {
        state.timeline = Timeline(origin: now() + UInt64(options.startInSeconds * 1e9))
        state.startGate = .pending
        publishState()
        // Every source failed: the broadcast has nothing to play, and the reason is the last one.
        guard try openFirstPlayable(from: 0) else {
            if stopRequested.load(ordering: .acquiring) { return false }
            throw state.queue.last?.failure ?? PartyCastError(.notAudio, "nothing to play")
        }
        updateGreeting()
        return true
    }

    /// When the next chunk is due: `leadMilliseconds` before it plays.
    var nextChunkDue: UInt64 {
        let pts = state.timeline.presentationTime(ofFrame: state.timeline.end)
        return pts - min(pts, leadNanoseconds)
    }

    /// How long before it is heard each chunk goes out.
    var leadNanoseconds: UInt64 { UInt64(options.leadMilliseconds) * 1_000_000 }

    /// Decodes, encodes and queues the next chunk.
    func sendNextChunk() throws(PartyCastError) {
        guard state.chunkFormat != nil else { return }
        guard let encoder = state.encoder else { return try sendNextPacket() }
        let position = state.timeline.end
        let channels = encoder.format.channels
        let block = encoder.framesPerPacket * channels
        while state.pending.count < block, let source = state.source {
            if try !source.produce(into: &state.pending) { try advanceToNextItem() }
        }
        announceRetitling(heardAt: position + UInt64(block / channels))
        var realFrames = encoder.framesPerPacket
        if state.pending.count < block {
            // The end of the queue: the rest, padded; the chunk counts only the real frames.
            guard !state.pending.isEmpty else { return finishQueue() }
            realFrames = state.pending.count / channels
            state.pending.append(contentsOf: repeatElement(0, count: block - state.pending.count))
        }
        let samples = Array(state.pending[0..<block])
        state.pending.removeFirst(block)
        try send(samples, realFrames: realFrames, encoder: encoder)
        if realFrames < encoder.framesPerPacket { finishQueue() }
    }

    /// Sends the item's next packet as it is; on to the next item at its end.
    private func sendNextPacket() throws(PartyCastError) {
        var packet: AudioPacket?
        while packet == nil, let source = state.packets {
            packet = try source.nextPacket()
            if packet == nil { try advanceToNextItem() }
        }
        guard let packet else { return finishQueue() }
        try sendChunk(packet.payload, skipFrames: packet.skipFrames, realFrames: packet.frames, samples: [])
    }

    /// A live source's title changed (a station's `StreamTitle`): the listeners and the remotes hear
    /// of it from `position` on, as of a song that starts there. A source with a companion (mpd)
    /// is named by the companion instead (CompanionHandler.swift).
    private func announceRetitling(heardAt position: UInt64) {
        guard let index = state.currentIndex, state.queue[index].source.isLive, state.queue[index].id != companion?.item,
              let tags = state.source?.tags, tags != state.queue[index].tags,
              let (_, songFrame) = Timeline.heard(at: position, in: state.timeline.segments) else { return }
        state.queue[index].tags = tags
        logger.info("now playing: \(state.queue[index].title)")
        announceLiveItem(index, at: position, songFrame: songFrame)
    }

    /// Tells the listeners (and whoever joins later) that live item `index`, as it is now, plays
    /// from timeline `position` on, at its frame `songFrame`.
    func announceLiveItem(_ index: Int, at position: UInt64, songFrame: Int) {
        guard let chunkFormat = state.chunkFormat else { return }
        let announced = frame(Messages.metadata(state.queue[index], streamIndex: state.streamIndex, start: position, songFrame: songFrame))
        if let announced { fanout.broadcast(announced) }
        fanout.setPreamble([frame(streamFormat(chunkFormat, totalFrames: nil)), announced].compactMap { $0 })
        publishState()
    }

    /// Encodes one packet and queues it as the chunk at the timeline's end.
    private func send(_ samples: [Float], realFrames: Int, encoder: AudioEncoder) throws(PartyCastError) {
        let packet = try samples.withUnsafeBufferPointer { b throws(PartyCastError) in try encoder.encode(b) }
        try sendChunk(packet, skipFrames: 0, realFrames: realFrames, samples: Array(samples[0..<(realFrames * encoder.format.channels)]))
    }

    /// Queues a packet as the chunk at the timeline's end; `samples`: the PCM it carries, if any.
    private func sendChunk(_ packet: [UInt8], skipFrames: Int, realFrames: Int, samples: [Float]) throws(PartyCastError) {
        let position = state.timeline.end
        let pts = state.timeline.presentationTime(ofFrame: position)
        let chunk = try Messages.frame(Messages.audioChunk(sequence: state.sequence, position: position, presentationNanoseconds: pts,
                                                           frames: realFrames, skipFrames: skipFrames, streamIndex: state.streamIndex,
                                                           payload: packet))
        let time = now()
        fanout.queueChunk(chunk, position: position, presentationNanoseconds: pts, samples: samples, now: time)
        // Behind the pace (a resume, skip or seek refills a whole lead at once, and encoding it takes
        // tens of ms on a busy machine): out at once, or the first chunks, due a control margin from
        // now, would wait for the last and reach the listeners after their time.
        if pts + Self.batchWindowNanoseconds < time + leadNanoseconds {
            fanout.flushChunks()
        }
        state.sequence += 1
        state.timeline.append(frames: realFrames, samples: samples)
    }

    /// One chunk of silence where the timeline stops (a pause): a listener's interpolator reads a
    /// few frames ahead, and without it the last frames of the fade would be lost to an underrun.
    func sendSilence() throws(PartyCastError) {
        if let encoder = state.encoder {
            try send([Float](repeating: 0, count: encoder.framesPerPacket * encoder.format.channels), realFrames: encoder.framesPerPacket, encoder: encoder)
        } else if let silence = state.silentPacket {
            try sendChunk(silence.payload, skipFrames: silence.skipFrames, realFrames: silence.frames, samples: [])
        }
        fanout.flushChunks()
    }

    /// Every item has been sent: the tail is out, so the broadcast ends once it has been heard.
    private func finishQueue() {
        fanout.flushChunks()
        state.reachedEnd = true
    }

    /// Opens the first item from `index` on that plays (skipping, with a line, those that don't);
    /// false when none does.
    func openFirstPlayable(from index: Int) throws(PartyCastError) -> Bool {
        var index = index
        while index < state.queue.count {
            do throws(PartyCastError) {
                let pendingFrames = state.pending.count / max(1, state.chunkFormat?.format.channels ?? 2)
                try open(index: index, atSongFrame: 0, position: state.timeline.end + UInt64(pendingFrames))
                return true
            } catch {
                if stopRequested.load(ordering: .acquiring) { return false }
                logger.warning("skipping \(state.queue[index].source.label): \(error.message)")
                state.queue[index].failure = error
                index += 1
            }
        }
        return false
    }

    /// The current item ended: on to the next (or the first again with `--loop`).
    private func advanceToNextItem() throws(PartyCastError) {
        if let live = state.source as? LiveSource, let index = state.currentIndex {
            logger.info("\(state.queue[index].source.label) ended: \(live.healthSummary)")
        }
        state.source = nil
        state.tone = nil
        state.packets = nil
        if let end = frame(Messages.endOfStream(streamIndex: state.streamIndex)) { fanout.broadcast(end) }
        let next = (state.currentIndex ?? -1) + 1
        if try openFirstPlayable(from: next) { return }
        if options.loop, !state.queue.isEmpty, try openFirstPlayable(from: 0) { return }
        state.currentIndex = nil
        // The codec's delay in silence after the last song, so its last real samples come out too.
        if let chunkFormat = state.chunkFormat { state.pending.append(contentsOf: repeatElement(0, count: chunkFormat.preSkip * chunkFormat.format.channels)) }
    }

    /// Opens item `index` at `songFrame`; its first frame is heard at timeline `position`.
    func open(index: Int, atSongFrame songFrame: Int, position: UInt64) throws(PartyCastError) {
        let item = state.queue[index]
        let opened: (tags: TrackTags, duration: Duration)
        if options.codec.passesThrough {
            let packets = try openPackets(item.source)
            if songFrame > 0 { try packets.seek(toFrame: songFrame) }
            state.packets = packets
            opened = (packets.tags, packets.duration)
        } else {
            let source = try openDecoded(item.source)
            if songFrame > 0 { try source.seek(toFrame: songFrame) }
            state.source = source
            opened = (source.tags, source.duration)
        }
        let chunkFormat = state.chunkFormat!  // set by the open above
        state.currentIndex = index
        state.streamIndex &+= 1
        state.queue[index].tags = opened.tags
        state.queue[index].durationFrames = opened.duration.frames
        state.queue[index].sampleRate = chunkFormat.format.sampleRate
        state.timeline.start(item: item.id, songFrame: songFrame, at: position)
        fanout.setPreamble([frame(streamFormat(chunkFormat, totalFrames: opened.duration.frames)),
                            frame(Messages.metadata(state.queue[index], streamIndex: state.streamIndex, start: position, songFrame: songFrame))]
            .compactMap { $0 })
        publishState()
    }

    private func streamFormat(_ chunkFormat: ChunkFormat, totalFrames: Int?) -> PCEnvelope {
        Messages.streamFormat(codec: options.codec.kind, chunkFormat, streamIndex: state.streamIndex, totalFrames: totalFrames)
    }

    /// The broadcast's format, set once by the first source: the timeline counts in its frames.
    private func setChunkFormat(_ chunkFormat: ChunkFormat) {
        state.chunkFormat = chunkFormat
        state.timeline.sampleRate = chunkFormat.format.sampleRate
    }

    /// A source decoded and converted to the broadcast's format, ready to encode.
    private func openDecoded(_ item: ResolvedSource) throws(PartyCastError) -> PCMSource {
        let decoded = try LiveSource.open(item, wakeup: wakeup) { stopRequested.load(ordering: .acquiring) }
        state.tone = decoded as? ToneGenerator
        guard let sourceFormat = decoded.format else { throw PartyCastError(.notAudio, "no audio") }
        // One format for the whole broadcast: the encoder's, set by the first source.
        if state.encoder == nil {
            let encoder = try options.codec.makeEncoder(for: sourceFormat, bitrateKbps: options.bitrateKbps)
            state.encoder = encoder
            setChunkFormat(ChunkFormat(format: encoder.format, framesPerChunk: encoder.framesPerPacket, preSkip: encoder.preSkip))
            fanout.setAudioFormat(encoder.format)
        }
        let target = state.encoder!.format
        let source: PCMSource = sourceFormat == target
            ? decoded : try FormatConverter(source: decoded, sampleRate: target.sampleRate, channels: target.channels)
        try source.prepare()
        return source
    }

    /// A source's own packets, which must match the broadcast's format: they are sent as they are.
    private func openPackets(_ item: ResolvedSource) throws(PartyCastError) -> PacketSource {
        guard let open = item.openPackets else { throw PartyItem.noPackets }
        let packets = try LiveSource.openAside(open, mayWait: item.isLive, wakeup: wakeup, stopping: { stopRequested.load(ordering: .acquiring) }) {
            source throws(PartyCastError) in try source.prepare()
        }.source
        guard let format = packets.format else { throw PartyCastError(.notAudio, "no audio") }
        if state.chunkFormat == nil {
            setChunkFormat(ChunkFormat(format: format, framesPerChunk: packets.framesPerPacket, preSkip: 0))
            state.silentPacket = packets.silentPacket
        }
        let broadcast = state.chunkFormat!
        guard format == broadcast.format, packets.framesPerPacket == broadcast.framesPerChunk else {
            throw PartyCastError(.unsupportedFormat, "it is \(format), the broadcast \(broadcast.format), and --codec \(options.codec.name) sends frames as they are, without resampling (use --codec opus to mix them)")
        }
        return packets
    }
}
