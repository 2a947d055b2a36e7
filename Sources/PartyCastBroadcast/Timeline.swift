import PartyCastCore

/// The broadcast's one line of positions and presentation times (presentation = origin + position
/// / rate), what has been sent along it and which song each stretch of it plays. A value, with no
/// clock, thread or socket: the pacer hands it the time and does the sending.
///
/// A pause is a gap in positions: what was sent from the cut on is taken back and the segments it
/// held wait (`held`) until the resume puts them back on the line further on. A skip or a seek
/// replaces what was sent from the cut on.
struct Timeline {
    /// From position `position` on, the song `item` plays from its frame `songFrame`.
    struct Segment: Equatable {
        var position: UInt64
        var item: Int
        var songFrame: Int
    }

    /// A chunk sent ahead of its time, with the PCM it carries (none when the source's packets pass
    /// through): a pause takes it back exactly.
    struct SentChunk {
        var position: UInt64
        var frames: Int
        var samples: [Float]
    }

    /// A segment taken back by a pause: it plays `offset` frames after the resume point.
    struct HeldSegment: Equatable {
        var offset: UInt64
        var item: Int
        var songFrame: Int
    }

    /// When position 0 is heard (monotonic nanoseconds).
    var origin: UInt64
    /// The timeline's unit (48 kHz until the first source sets the broadcast's rate).
    var sampleRate = 48000
    /// The next chunk's position: where what has been sent ends.
    var end: UInt64 = 0
    var sent: [SentChunk] = []
    var segments: [Segment] = []
    var paused = false
    /// While paused: the segments resume plays, the first at offset 0.
    var held: [HeldSegment] = []

    init(origin: UInt64) { self.origin = origin }

    /// When frame `frame` of the timeline is heard.
    func presentationTime(ofFrame frame: UInt64) -> UInt64 {
        origin &+ UInt64(StreamTime.nanoseconds(frames: Int64(clamping: frame), sampleRate: sampleRate) ?? Int64.max)
    }

    /// The position heard at `time` (0 before the broadcast starts).
    func position(at time: UInt64) -> UInt64 {
        Self.position(at: time, origin: origin, rate: sampleRate)
    }

    static func position(at time: UInt64, origin: UInt64, rate: Int) -> UInt64 {
        guard time > origin else { return 0 }
        let elapsed = time - origin
        return elapsed / 1_000_000_000 * UInt64(rate) + (elapsed % 1_000_000_000) * UInt64(rate) / 1_000_000_000
    }

    /// The song and its frame heard at `position`, or, paused, those resume plays first.
    func heard(at position: UInt64) -> (item: Int, songFrame: Int)? {
        if paused { return held.first.map { ($0.item, $0.songFrame) } }
        return Self.heard(at: position, in: segments)
    }

    static func heard(at position: UInt64, in segments: [Segment]) -> (item: Int, songFrame: Int)? {
        guard let segment = segments.last(where: { $0.position <= position }) else { return nil }
        return (segment.item, segment.songFrame + Int(position - segment.position))
    }

    /// The song and its frame heard at `time`: nothing before the broadcast starts, and a change
    /// (a cut, a resume) from its position `changeHeardFrom` on even if the clock has not reached it.
    /// What the snapshots show and what the pacer republishes on, so the two agree.
    static func heard(at time: UInt64, origin: UInt64, rate: Int, changeHeardFrom: UInt64,
                      in segments: [Segment]) -> (item: Int, songFrame: Int)? {
        let position = max(position(at: time, origin: origin, rate: rate), changeHeardFrom)
        guard time >= origin || position > 0 else { return nil }
        return heard(at: position, in: segments)
    }

    /// Song `item` is heard from its frame `songFrame` on, starting at `position`.
    mutating func start(item: Int, songFrame: Int, at position: UInt64) {
        segments.append(Segment(position: position, item: item, songFrame: songFrame))
    }

    /// A chunk of `frames` frames went out at the end of the line.
    mutating func append(frames: Int, samples: [Float]) {
        sent.append(SentChunk(position: end, frames: frames, samples: samples))
        end += UInt64(frames)
    }

    /// The first chunk boundary already sent at or after `earliest`; nil when none has been.
    func sentBoundary(atOrAfter earliest: UInt64) -> UInt64? {
        sent.first { $0.position >= earliest }?.position
    }

    /// Takes back the chunks sent from `position` on and returns them.
    mutating func withdraw(from position: UInt64) -> [SentChunk] {
        let withdrawn = sent.filter { $0.position >= position }
        sent.removeAll { $0.position >= position }
        return withdrawn
    }

    /// The line ends at `position`: what follows it is to be replaced.
    mutating func cut(at position: UInt64) {
        segments.removeAll { $0.position >= position }
        end = position
    }

    /// Pauses at `position`: the segments from there on (and the one heard there) wait for the resume.
    mutating func pause(at position: UInt64) {
        held = segments.filter { $0.position >= position }.map { HeldSegment(offset: $0.position - position, item: $0.item, songFrame: $0.songFrame) }
        cut(at: position)
        if held.first?.offset != 0, let heard = Self.heard(at: position, in: segments) {
            held.insert(HeldSegment(offset: 0, item: heard.item, songFrame: heard.songFrame), at: 0)
        }
        paused = true
    }

    /// While paused: resume plays song `item` from `songFrame` instead.
    mutating func hold(item: Int, songFrame: Int) {
        segments.removeAll { $0.position >= end }
        held = [HeldSegment(offset: 0, item: item, songFrame: songFrame)]
    }

    /// Puts what the pause held back on the line from `position` on; returns the first of it.
    mutating func resume(at position: UInt64) -> HeldSegment? {
        end = position
        for segment in held {
            segments.append(Segment(position: position + segment.offset, item: segment.item, songFrame: segment.songFrame))
        }
        defer { held = [] }
        paused = false
        return held.first
    }

    /// Forgets chunks and segments heard before `position`, keeping the segment heard there.
    mutating func forgetHeard(before position: UInt64) {
        sent.removeAll { $0.position + UInt64($0.frames) <= position }
        if let heardIndex = segments.lastIndex(where: { $0.position <= position }), heardIndex > 0 {
            segments.removeFirst(heardIndex)
        }
    }
}
