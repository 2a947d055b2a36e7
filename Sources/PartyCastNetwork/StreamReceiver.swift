import PartyCastCodec
import PartyCastClock
import PartyCastCore
import PartyCastWire

/// What a broadcaster streams after its Welcome, checked before use and turned into PCM. Free of
/// I/O; runs on the player's producer thread. Nothing a broadcaster sends can trap, hang or grow it:
/// formats are checked per codec, every number from the wire goes through checked arithmetic, a
/// chunk with absurd numbers is dropped and one that does not decode is concealed (both counted),
/// and text is made safe to print. A format it cannot play is a violation: the caller ends the
/// connection and goes on as for any lost broadcaster.
struct StreamReceiver {
    /// A stream format the listener can play, as announced.
    struct Spec: Equatable, CustomStringConvertible {
        var codec: PCCodecKind
        var wire: any WireCodec
        var format: AudioFormat
        var framesPerChunk: Int
        var preSkip: Int

        var description: String { "\(codec) \(format), \(framesPerChunk) frames per chunk" }

        static func == (a: Spec, b: Spec) -> Bool {
            a.codec == b.codec && a.format == b.format && a.framesPerChunk == b.framesPerChunk && a.preSkip == b.preSkip
        }

        /// Whether a chunk of `other` can follow one of `self` through the same decoder and ring.
        func continues(_ other: Spec) -> Bool {
            codec == other.codec && format == other.format && framesPerChunk == other.framesPerChunk
        }
    }

    enum Outcome: Equatable {
        case continues
        /// The broadcaster said goodbye.
        case ended
        /// End this connection, saying why.
        case violation(String)
    }

    /// Positions beyond this (186 years at 48 kHz) are no real broadcast's.
    static let maximumPosition: UInt64 = 1 << 48
    /// Chunk times follow from positions to the nanosecond; more than this off is another timeline.
    static let timelineTolerance: Int64 = 1_000_000
    /// A chunk is sent at most `--buffer` (≤ 10 s) ahead of its time, and a late one is useless
    /// after a few seconds: a time this far from where the stream stands is absurd.
    static let plausibleDistance: Int64 = 30_000_000_000
    /// After this many chunks in a row disagree with the timeline, the broadcaster's new timeline
    /// wins (so a bad first chunk cannot make every good one look wrong).
    static let realignAfter = 50
    /// Longest text shown from the wire.
    static let textLimit = 200
    /// The longest gain ramp: 10 s.
    static let longestRampSeconds = 10
    /// Timeline events held for the player at most (it takes them after every message; only the
    /// messages before the stream format pile up).
    static let eventLimit = 64
    /// Songs announced ahead that are remembered.
    static let songLimit = 4
    /// A chunk may decode to this many chunks' worth ahead of its own frames (a seek's preroll).
    static let maximumChunksSkipped = 64

    private(set) var spec: Spec?
    /// The newest song's tags.
    var tags: TrackTags { songs.last?.tags ?? TrackTags() }
    /// The songs announced, with the timeline position each is heard from (a few: the one playing
    /// and those sent ahead of it).
    private var songs: [(start: UInt64, tags: TrackTags)] = []
    private(set) var duration: Duration = .unknown
    private(set) var broadcasterName = ""
    /// Chunks refused for absurd numbers, and chunks that did not decode and were concealed.
    private(set) var droppedChunks = 0
    private(set) var concealedChunks = 0
    /// Timeline messages (Withdraw, Gain, ListenerSettings, Identify) refused for absurd numbers, or for
    /// coming faster than the player takes them.
    private(set) var droppedMessages = 0
    /// Withdraws and gains for the player, in order.
    private var events: [TimelineEvent] = []
    private(set) var partyPaused = false
    /// The latency offset the broadcaster set (ms); nil until it sets one.
    private(set) var latencyOffsetMilliseconds: Int?
    /// The channel the broadcaster set; nil until it sets one.
    private(set) var channel: ChannelAssignment?
    /// The stream frame of the first sample the last `receive` appended; nil if it appended none.
    private(set) var lastProducedFrame: Int?

    private let clockSync: ClockSync
    private var sessionID: UInt64?
    private var decoder: AudioDecoder?
    /// The stream the decoder has decoded, for codecs that decode each stream afresh.
    private var decodedStream: UInt32?
    private var framesToSkip = 0
    /// Just past the last chunk played in this session: a reconnect to the same broadcast is sent its
    /// unplayed chunks again, and those already played must not play twice.
    private var playedUpTo: UInt64?
    /// The last accepted chunk: presentation time, position and local arrival time.
    private var anchor: (presentation: Int64, position: Int64, arrival: Int64)?
    private var disagreeing = 0
    private var scratch: [Float] = []

    init(clockSync: ClockSync) { self.clockSync = clockSync }

    /// Applies one message the connection gate let through, appending any PCM to `buffer`.
    mutating func receive(_ envelope: PCEnvelope, arrivedAt: Int64, into buffer: inout [Float]) -> Outcome {
        lastProducedFrame = nil
        switch envelope.body {
        case .welcome(let welcome)?:
            broadcasterName = String(untrusted: welcome.broadcasterName, limit: 60)
            if sessionID != welcome.sessionID { startSession(welcome.sessionID) }
        case .streamFormat(let announced)?:
            return adopt(announced)
        case .metadata(let metadata)?:
            let tags = TrackTags(title: Self.text(metadata.title), artist: Self.text(metadata.artist), album: Self.text(metadata.album))
            // A song heard from a position replaces whatever was announced from there on (a skip, a seek).
            let start = min(metadata.startPosition, Self.maximumPosition)
            songs.removeAll { $0.start >= start }
            songs.append((start, tags))
            if songs.count > Self.songLimit { songs.removeFirst(songs.count - Self.songLimit) }
            duration = (1..<Self.maximumPosition).contains(metadata.durationFrames) ? .exact(frames: Int(metadata.durationFrames)) : .unknown
        case .audioChunk(let chunk)?:
            guard let spec, decoder != nil else { return .violation("it sent audio before its stream format") }
            play(chunk, arrivedAt: arrivedAt, spec: spec, into: &buffer)
        case .withdraw(let withdraw)?:
            self.withdraw(from: withdraw.fromPosition)
        case .gain(let gain)?:
            let longest = UInt32(Self.longestRampSeconds * (spec?.format.sampleRate ?? 48000))
            guard gain.atPosition < Self.maximumPosition, gain.gain.isFinite, gain.rampFrames <= longest else {
                droppedMessages += 1
                break
            }
            post(.gain(min(max(gain.gain, 0), 1), atFrame: Int(gain.atPosition), rampFrames: Int(gain.rampFrames)))
        case .identify(let identify)?:
            // Only near where the stream stands: a chime planned for years ahead would never be heard.
            let reach = Self.plausibleDistance / 1_000_000_000 * Int64(spec?.format.sampleRate ?? 48000)
            guard identify.atPosition < Self.maximumPosition,
                  anchor.map({ abs(Int64(identify.atPosition) - $0.position) <= reach }) ?? true else {
                droppedMessages += 1
                break
            }
            post(.identify(atFrame: Int(identify.atPosition)))
        case .partyState(let state)?:
            partyPaused = state.paused
        case .listenerSettings(let settings)?:
            // All or nothing: a message with one absurd field is not half applied.
            let channel = ChannelAssignment(wire: settings.channel)
            guard !settings.hasLatencyOffsetMilliseconds || (-2000...2000).contains(settings.latencyOffsetMilliseconds),
                  channel != nil || settings.channel == .channelUnspecified else {
                droppedMessages += 1
                break
            }
            if settings.hasLatencyOffsetMilliseconds { latencyOffsetMilliseconds = Int(settings.latencyOffsetMilliseconds) }
            if let channel { self.channel = channel }
        case .goodbye?:
            return .ended
        default:
            break
        }
        return .continues
    }

    /// The tags of the song heard at stream frame `frame`: the newest if it is not known.
    func tags(atFrame frame: Int?) -> TrackTags {
        guard let frame else { return tags }
        return (songs.last { $0.start <= UInt64(max(0, frame)) } ?? songs.first)?.tags ?? TrackTags()
    }

    /// The player's events since the last call.
    mutating func takeEvents() -> [TimelineEvent] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    private mutating func post(_ event: TimelineEvent) {
        guard events.count < Self.eventLimit else {
            droppedMessages += 1
            return
        }
        events.append(event)
    }

    /// Audio from `position` on is withdrawn: what replaces it comes from `position` (or later),
    /// and must not be taken for chunks already played.
    private mutating func withdraw(from position: UInt64) {
        guard position < Self.maximumPosition else {
            droppedMessages += 1
            return
        }
        // Before any audio there is nothing to withdraw.
        guard let played = playedUpTo else { return }
        playedUpTo = min(played, position)
        post(.withdraw(fromFrame: Int(position)))
    }

    /// A broadcast (a broadcaster's run) starts afresh: new decoder state, new timeline.
    private mutating func startSession(_ id: UInt64) {
        sessionID = id
        decoder = nil
        decodedStream = nil
        playedUpTo = nil
        anchor = nil
        disagreeing = 0
    }

    private mutating func adopt(_ announced: PCStreamFormat) -> Outcome {
        let candidate: Spec
        switch Self.validate(announced) {
        case .success(let spec): candidate = spec
        case .failure(let why): return .violation("it announced a stream this listener cannot play: \(why)")
        }
        // The player's ring and output are set up for one format: a change can't be followed.
        if let spec, !spec.continues(candidate) {
            return .violation("it changed the stream from \(spec) to \(candidate) mid-stream")
        }
        guard decoder == nil else { return .continues }
        do {
            decoder = try candidate.wire.makeDecoder(format: candidate.format)
        } catch {
            return .violation(error.message)
        }
        spec = candidate
        framesToSkip = candidate.preSkip
        return .continues
    }

    /// Every field of a stream format, within what the codec can carry and a listener can hold.
    static func validate(_ announced: PCStreamFormat) -> Result<Spec, PlayabilityError> {
        let rate = Int(announced.sampleRate), channels = Int(announced.channels), frames = Int(announced.framesPerChunk)
        let preSkip = Int(announced.preSkip)
        guard let wire = WireCodecs.carrying(announced.codec) else {
            return .failure(.init("the codec \(announced.codec) (upgrade the listener if the broadcaster is newer)"))
        }
        if let why = wire.refusal(sampleRate: rate, channels: channels, framesPerChunk: frames) { return .failure(.init(why)) }
        // Pre-skip is the codec's start-up delay: a few ms, never a second.
        guard preSkip <= rate else { return .failure(.init("a pre-skip of \(preSkip) frames")) }
        return .success(Spec(codec: announced.codec, wire: wire, format: AudioFormat(sampleRate: rate, channels: channels),
                             framesPerChunk: frames, preSkip: preSkip))
    }

    struct PlayabilityError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    private mutating func play(_ chunk: PCAudioChunk, arrivedAt: Int64, spec: Spec, into buffer: inout [Float]) {
        let frameCount = Int(chunk.frameCount)
        // What a chunk may decode to in front of its frames: a song's start or a seek's preroll.
        let skip = Int(chunk.skipFrames)
        guard (1...spec.framesPerChunk).contains(frameCount), skip <= spec.framesPerChunk * Self.maximumChunksSkipped,
              chunk.mediaPosition < Self.maximumPosition,
              fitsTimeline(chunk, arrivedAt: arrivedAt, sampleRate: spec.format.sampleRate) else {
            droppedChunks += 1
            return
        }
        if let playedUpTo, chunk.mediaPosition < playedUpTo { return }
        playedUpTo = chunk.mediaPosition + UInt64(frameCount)
        let decoder = decoder(for: chunk.streamIndex, spec: spec)

        let channels = spec.format.channels
        scratch.removeAll(keepingCapacity: true)
        // Every chunk stands for exactly frameCount frames, whatever its payload decodes to, so the
        // timeline never slips: a short or undecodable payload is made up by concealment.
        var from = skip
        let whole = spec.wire.couldBeChunk(payloadBytes: chunk.payload.count, framesPerChunk: spec.framesPerChunk, channels: channels)
        let decoded = whole ? (try? decoder.decode(chunk.payload, into: &scratch)) ?? -1 : -1
        if decoded < skip + frameCount {
            concealedChunks += 1
            scratch.removeAll(keepingCapacity: true)
            decoder.conceal(frames: spec.wire.framesToConceal(framesPerChunk: spec.framesPerChunk, frameCount: frameCount), into: &scratch)
            from = 0
        }
        var keep = max(0, min(frameCount, scratch.count / channels - from))
        var delay = 0
        if framesToSkip > 0 {  // the codec's own delay comes out first
            delay = min(framesToSkip, keep)
            framesToSkip -= delay
            keep -= delay
        }
        // A fresh decoder's output runs `preSkip` frames behind the chunks' positions; those frames
        // were skipped above, so what is kept starts at this stream frame.
        if keep > 0 { lastProducedFrame = Int(chunk.mediaPosition) - spec.preSkip + delay }
        buffer.append(contentsOf: scratch[((from + delay) * channels)..<((from + delay + keep) * channels)])
    }

    /// The decoder for a chunk of stream `index`: a fresh one at each new stream for a codec that
    /// decodes streams apart (the old one if a new one cannot be made: a glitch, not silence).
    private mutating func decoder(for index: UInt32, spec: Spec) -> AudioDecoder {
        if spec.wire.decodesStreamsApart, decodedStream != index, let fresh = try? spec.wire.makeDecoder(format: spec.format) {
            decodedStream = index
            decoder = fresh
        }
        return decoder!  // made by adopt() before any chunk is let through
    }

    /// Whether a chunk's time agrees with the stream's: its presentation time follows from its
    /// position as the last good chunk's did, and it is not absurdly far from where the stream
    /// stands by the local clock. The first chunk (and the new timeline after `realignAfter`
    /// disagreeing ones) sets the stream's timing for clock sync.
    private mutating func fitsTimeline(_ chunk: PCAudioChunk, arrivedAt: Int64, sampleRate: Int) -> Bool {
        let position = Int64(chunk.mediaPosition)  // < 2⁴⁸, checked by the caller
        let presentation = chunk.presentationNanoseconds
        guard let origin = StreamTime.nanoseconds(frames: position, sampleRate: sampleRate)
            .flatMap({ presentation.subtractingReportingOverflow($0) }).flatMap({ $0.overflow ? nil : $0.partialValue }) else {
            return false
        }
        if let anchor, !Self.agrees(presentation: presentation, position: position, arrival: arrivedAt, anchor: anchor, sampleRate: sampleRate) {
            disagreeing += 1
            guard disagreeing >= Self.realignAfter else { return false }
            playedUpTo = nil  // a new timeline: positions may start over
        }
        if anchor == nil || disagreeing > 0 {
            clockSync.setTiming(ClockSync.StreamTiming(originNanoseconds: origin, sampleRate: sampleRate))
            anchor = nil
        }
        disagreeing = 0
        // The anchor follows the stream forward only: a resent earlier chunk (a rejoin's backlog)
        // arriving now must not make the stream look behind where it stands.
        if position > anchor?.position ?? .min { anchor = (presentation, position, arrivedAt) }
        return true
    }

    private static func agrees(presentation: Int64, position: Int64, arrival: Int64,
                               anchor: (presentation: Int64, position: Int64, arrival: Int64), sampleRate: Int) -> Bool {
        guard let span = StreamTime.nanoseconds(frames: position - anchor.position, sampleRate: sampleRate) else { return false }
        let expected = anchor.presentation.addingReportingOverflow(span)
        let error = presentation.subtractingReportingOverflow(expected.partialValue)
        guard !expected.overflow, !error.overflow, error.partialValue.magnitude <= UInt64(timelineTolerance) else { return false }
        // Stream time elapsed since the anchor against local time elapsed: far apart means absurd.
        let waited = arrival.subtractingReportingOverflow(anchor.arrival)
        let distance = span.subtractingReportingOverflow(waited.partialValue)
        return !waited.overflow && !distance.overflow && distance.partialValue.magnitude <= UInt64(plausibleDistance)
    }

    private static func text(_ raw: String) -> String? {
        let clean = String(untrusted: raw, limit: textLimit)
        return clean.isEmpty ? nil : clean
    }
}
