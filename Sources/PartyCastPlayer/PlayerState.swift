import PartyCastCore

/// Where a player is in its life. Every change goes through `Player.transition(to:)`.
public enum PlayerState: String, Sendable, Equatable {
    case idle, connecting, waitingForData, buffering, playing, paused, stopping, stopped

    /// The state as a person reads it on a status line.
    public var words: String {
        self == .waitingForData ? "waiting for data" : rawValue
    }

    /// The moves the player may make; anything else is a bug and is refused.
    func canMove(to next: PlayerState) -> Bool {
        switch (self, next) {
        case (_, .stopping): return self != .stopped && self != .stopping
        case (.stopping, .stopped): return true
        case (.idle, .connecting), (.connecting, .waitingForData), (.waitingForData, .buffering): return true
        case (.buffering, .playing), (.buffering, .paused): return true
        case (.playing, .buffering), (.playing, .paused): return true
        case (.paused, .buffering), (.paused, .playing): return true
        default: return false
        }
    }
}

/// Why a player stopped.
public enum StopReason: Sendable, Equatable {
    case endOfStream
    case user
    case error(PartyCastError)
    /// The source went away but may come back (a network peer); the next issues retry on it.
    case temporary(PartyCastError)
}

/// A snapshot for observers (the status line), taken on the control thread.
public struct PlayerStatus: Sendable {
    public var state: PlayerState = .idle
    public var stopReason: StopReason?
    public var format: AudioFormat?
    public var tags = TrackTags()
    public var duration: Duration = .unknown
    /// Frames of the stream heard so far (position on the stream's timeline).
    public var positionFrames = 0
    /// How full the ring is, 0…1.
    public var bufferFill = 0.0
    /// Audio waiting in the ring, in milliseconds.
    public var bufferedMilliseconds = 0
    public var underruns = 0
    /// Party mode: how late playback is against the broadcast's schedule (µs; negative: early).
    public var syncErrorMicroseconds: Int?
    public var skippedBytes: Int64 = 0
    /// Packets the source concealed (a broadcast's bad chunks).
    public var concealedPackets = 0
    public var outputName = ""
    /// A live broadcast's party is paused (by its remote or its broadcaster).
    public var partyPaused = false
    /// Party mode: the speaker delay played ahead of (--latency-offset, or what the broadcaster set).
    public var latencyOffsetMilliseconds = 0
    /// Which of the source's channels every output channel plays (--channel, or what the broadcaster set).
    public var channel = ChannelAssignment.stereo

    public var positionSeconds: Double {
        guard let rate = format?.sampleRate else { return 0 }
        return Double(positionFrames) / Double(rate)
    }

    public var durationSeconds: Double? {
        guard let rate = format?.sampleRate, let frames = duration.frames else { return nil }
        return Double(frames) / Double(rate)
    }
}
