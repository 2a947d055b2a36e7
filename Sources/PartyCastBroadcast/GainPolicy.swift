import Foundation
import PartyCastCore

/// What each listener should hear of the party's volume and its own: the gain curve and where each
/// of its Gain messages may start. A value; the party sends what it says.
struct GainPolicy {
    /// Fades around a pause, a resume, a skip and a seek; volume changes ramp for longer.
    static let fadeSeconds = 0.005
    static let volumeRampSeconds = 0.030

    /// A listener's settings, kept across its reconnects.
    struct ListenerSettings {
        var volume = 100
        var muted = false
        /// Set from the remote; nil: the listener's own `--latency-offset`.
        var latencyOffsetMilliseconds: Int?
        /// Set from the remote; nil: the listener's own `--channel`.
        var channel: ChannelAssignment?
        /// Where its last Gain started: the next may not start earlier.
        var lastGainPosition: UInt64 = 0
    }

    var partyVolume = 100
    var settings: [String: ListenerSettings] = [:]

    static func fadeFrames(sampleRate: Int) -> Int { Int(fadeSeconds * Double(sampleRate)) }
    static func volumeRampFrames(sampleRate: Int) -> Int { Int(volumeRampSeconds * Double(sampleRate)) }

    /// The amplitude for a volume: cubic, so that equal steps of the slider sound like equal steps.
    static func gain(forVolume volume: Int, muted: Bool, party: Int) -> Float {
        muted ? 0 : Float(pow(Double(volume) / 100, 3) * pow(Double(party) / 100, 3))
    }

    func gain(of id: String) -> Float {
        let listener = settings[id] ?? ListenerSettings()
        return Self.gain(forVolume: listener.volume, muted: listener.muted, party: partyVolume)
    }

    /// Where a Gain for `id` asked to start at `position` does start (never before its last one),
    /// remembered as its last.
    mutating func claimStart(_ position: UInt64, for id: String) -> UInt64 {
        let start = max(position, settings[id]?.lastGainPosition ?? 0)
        settings[id, default: ListenerSettings()].lastGainPosition = start
        return start
    }

    /// What a listener joining now is told: the gain of one the remote never set, each set one's
    /// own, and the latency offsets and channels the remote set. Paused, every gain is 0 until the resume.
    func greeting(paused: Bool) -> Greeting {
        Greeting(defaultGain: paused ? 0 : Self.gain(forVolume: 100, muted: false, party: partyVolume),
                 gains: settings.mapValues { paused ? 0 : Self.gain(forVolume: $0.volume, muted: $0.muted, party: partyVolume) },
                 remoteSettings: settings.compactMapValues { s in
                     let remote = RemoteSettings(latencyOffsetMilliseconds: s.latencyOffsetMilliseconds, channel: s.channel)
                     return remote == RemoteSettings() ? nil : remote
                 })
    }
}

/// What the remote set for one listener besides its volume (nil: the listener's own).
struct RemoteSettings: Equatable {
    var latencyOffsetMilliseconds: Int?
    var channel: ChannelAssignment?
}

/// What a joining listener is told before any audio.
struct Greeting {
    var defaultGain: Float = 1
    var gains: [String: Float] = [:]
    var remoteSettings: [String: RemoteSettings] = [:]
}
