import PartyCastClock
import PartyCastCore
import PartyCastOutput

/// Where the gains a broadcast sends (its volume, the listener's, and silence for a mute or a
/// pause) are applied (`listener join --mixer`).
public enum VolumeApplication: Sendable {
    /// In the samples: the renderer's gain curve.
    case software
    /// The level on the card's mixer, set when the gain comes (up to the broadcast's lead before it
    /// is heard); the samples stay at full scale. Silence stays in the samples, at its frame: a gain
    /// of 0 does not say whether it is a mute or a pause, and a pause must be heard at the same
    /// instant everywhere.
    case hardware(ALSAMixer)
    /// Nowhere: full scale, silence still in the samples.
    case none
}

/// The producer's side of a live broadcast's timeline events: it cuts the ring at withdrawn frames
/// and keeps the gain curve the output thread reads.
struct TimelineEdits {
    let volume: VolumeApplication
    private var gains = GainCurve()
    /// The cut asked of the output thread and not yet answered, if any: its ticket and frame.
    private var cut: (ticket: Int, frame: Int)?
    /// The frames of the last chime planned: one asked for while it plays is dropped, so a flood of
    /// identifies plays one chime at a time rather than restarting it over and over.
    private var lastChime = 0..<0

    init(volume: VolumeApplication) { self.volume = volume }

    mutating func apply(_ events: [TimelineEvent], renderer: Renderer, timeline: inout TimelineKeeper) throws(PartyCastError) {
        var gainsChanged = false
        for event in events {
            switch event {
            case .withdraw(let frame):
                // Only what was written from `frame` on needs cutting; a cut not yet answered is
                // widened rather than waited for, so a flood of withdraws costs no waiting.
                guard timeline.withdraw(from: frame) else { continue }
                if let cut, !renderer.isCut(cut.ticket) {
                    let earliest = min(cut.frame, frame)
                    self.cut = (renderer.requestCut(atFrame: earliest), earliest)
                } else {
                    cut = (renderer.requestCut(atFrame: frame), frame)
                }
            case .gain(let gain, let frame, let ramp):
                switch volume {
                case .software:
                    gains.set(gain, atFrame: frame, rampFrames: ramp)
                case .hardware(let mixer):
                    if gain > 0 { try mixer.set(gain: gain) }
                    gains.set(gain > 0 ? 1 : 0, atFrame: frame, rampFrames: ramp)
                case .none:
                    gains.set(gain > 0 ? 1 : 0, atFrame: frame, rampFrames: ramp)
                }
                gainsChanged = true
            case .identify(let asked):
                // Party mode plays each frame at its time, so the one asked for is still to come. The
                // plain path hands frames on as soon as they are written (a file output writes them
                // at once): there the chime starts at the first frame not yet written, if later.
                let frame = renderer.isScheduled ? asked : max(asked, timeline.nextFrame ?? asked)
                guard let chime = renderer.chime, !lastChime.contains(frame) else { continue }
                chime.play(atFrame: frame)
                lastChime = frame..<(frame + chime.frames)
            }
        }
        guard gainsChanged else { return }
        if let playing = renderer.playingStreamFrame { gains.forget(before: playing) }
        renderer.gains.publish(gains)
    }

    /// The ticket of the cut under way, to wait for before writing; nil when there is none.
    mutating func take() -> Int? {
        defer { cut = nil }
        return cut?.ticket
    }
}

/// Keeps the ring's samples on a live source's timeline: each block it produces says which stream
/// frame it starts at; a short gap (chunks lost on the way, a short pause) is filled with silence
/// so later frames keep their place, a block that starts a little early (after a cut, Opus's codec
/// delay puts the replacement's first frames before the cut) loses its head, anything else starts
/// the ring's timeline afresh.
struct TimelineKeeper {
    enum Placement: Equatable {
        case continues
        case gap(frames: Int)
        case trim(frames: Int)
        case restart
    }

    /// Gaps and overlaps up to this long are bridged with silence or trimmed.
    let longestGap: Int
    /// Just past the last frame placed: where the next block is expected.
    private(set) var nextFrame: Int?

    init(sampleRate: Int) { longestGap = sampleRate }

    mutating func place(frame: Int, frames: Int) -> Placement {
        guard let expected = nextFrame else {
            nextFrame = frame + frames
            return .restart
        }
        let gap = frame - expected
        switch gap {
        case 0:
            nextFrame = frame + frames
            return .continues
        case 1...longestGap:
            nextFrame = frame + frames
            return .gap(frames: gap)
        case -longestGap..<0:
            nextFrame = max(expected, frame + frames)
            return .trim(frames: min(-gap, frames))
        default:
            nextFrame = frame + frames
            return .restart
        }
    }

    /// Audio from `frame` on is withdrawn; whether any of it was placed (then the ring must be cut).
    mutating func withdraw(from frame: Int) -> Bool {
        guard let expected = nextFrame, frame < expected else { return false }
        nextFrame = frame
        return true
    }
}
