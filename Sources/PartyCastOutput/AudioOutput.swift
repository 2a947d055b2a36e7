import PartyCastClock
import PartyCastCore

/// A place decoded audio goes. Each output runs its own thread that pulls from the `Renderer`;
/// the player only starts it, watches it, and stops it.
public protocol AudioOutput: AnyObject, Sendable {
    /// Short description for the status line ("wav:/tmp/x.wav").
    var name: String { get }
    /// Whether it consumes at the stream's rate (a device) rather than as fast as it can (a file).
    var isRealTime: Bool { get }
    /// Opens the device for `format` and starts pulling from `renderer` on a dedicated thread;
    /// `onEnd` runs on that thread once it has finished (never inside the real-time loop).
    func start(format: AudioFormat, renderer: Renderer, onEnd: @escaping @Sendable () -> Void) throws(PartyCastError)
    /// Asks the thread to end (after draining what the device holds, if `drain`) and waits for it.
    func stop(drain: Bool)
    /// Set once the output thread has ended: the stream finished, `stop` was called or it failed.
    var outcome: OutputOutcome? { get }
    /// Frames written to the device but not yet heard.
    var latencyFrames: Int { get }
}

public enum OutputOutcome: Sendable, Equatable {
    case finished
    case stopped
    case failed(PartyCastError)
}

/// Parses `alsa[:DEVICE] | wav:PATH | null | virtual:PATH`; real-time outputs keep time by `clock`.
public func makeOutput(_ spec: String, clock: LocalClock = .system) throws(PartyCastError) -> AudioOutput {
    let (kind, argument): (Substring, String?) = {
        guard let colon = spec.firstIndex(of: ":") else { return (Substring(spec), nil) }
        return (spec[..<colon], String(spec[spec.index(after: colon)...]))
    }()
    switch (kind, argument) {
    case ("null", nil): return NullOutput()
    case ("wav", let path?) where !path.isEmpty: return WavFileOutput(path: path)
    case ("virtual", let path?) where !path.isEmpty: return VirtualCardOutput(path: path, clock: clock)
    case ("alsa", let device): return ALSAOutput(device: device ?? "default", clock: clock)
    default:
        throw PartyCastError(.invalidArgument, "unknown output '\(spec)'; use alsa[:DEVICE], wav:PATH, null or virtual:PATH")
    }
}
