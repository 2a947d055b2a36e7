import PartyCastCore

/// Where a live source (a pipe, a station) meets a timeline that runs on the broadcaster's clock.
///
/// The source delivers at its own pace; the timeline takes a fixed number of frames per chunk.
/// The buffer between them is held near `targetFrames`:
/// - a stall (nothing buffered) puts silence on the timeline, and play resumes once the buffer is
///   back at its target, so a stall costs a gap, never an ever later party;
/// - more than `targetFrames + slackFrames` is never kept: what goes beyond is dropped, back to the
///   target (its user waits for room before appending, so only a block larger than that is cut);
/// - a source whose clock runs slightly fast or slow is absorbed by reading it slightly faster or
///   slower (windowed-sinc interpolation between its samples; bit for bit while no correction is
///   needed). The rate follows the buffer's smoothed level (a proportional controller, at most
///   `maxCorrectionPPM`), so the delay settles instead of growing.
/// Free of threads and clocks: time is the frames taken.
public final class LiveBuffer {
    public let format: AudioFormat
    public let targetFrames: Int
    public let slackFrames: Int
    public static let maxCorrectionPPM = 2000.0
    /// Level error (in fractions of the target) that asks for the full correction.
    static let fullCorrectionError = 0.5
    /// The level's smoothing, per frame taken: a time constant of about 4 s.
    private let smoothing: Double
    private let kernel = InterpolationKernel(halfTaps: 16)

    /// Interleaved frames; the kernel reads around `readFrame` (counted from the first queued
    /// frame), which has `halfTaps - 1` frames of history before it.
    private var queued: [Float]
    private var readFrame: Int
    private var fraction = 0.0
    private var playing = false
    private var sourceEnded = false
    private var smoothedLevel: Double
    private var appliedPPM = 0

    /// Stalls (the source had nothing) and the silence they put on the timeline.
    public private(set) var stalls = 0
    public private(set) var silentFrames = 0
    /// Frames of backlog dropped to keep the delay from growing.
    public private(set) var droppedFrames = 0
    /// The correction now applied, in parts per million (positive: the source's clock is fast).
    public var correctionPPM: Int { appliedPPM }

    public init(format: AudioFormat, targetMilliseconds: Int = 200, slackMilliseconds: Int = 300) {
        self.format = format
        targetFrames = format.sampleRate * targetMilliseconds / 1000
        slackFrames = format.sampleRate * slackMilliseconds / 1000
        smoothing = 1 / (4.0 * Double(format.sampleRate))
        smoothedLevel = Double(targetFrames)
        // Silent history, so the first frame has its taps.
        readFrame = kernel.halfTaps - 1
        queued = [Float](repeating: 0, count: readFrame * format.channels)
    }

    private var queuedFrames: Int { queued.count / format.channels }

    /// Frames that can be read now (the kernel needs `halfTaps` frames ahead of its position).
    public var level: Int { max(0, queuedFrames - readFrame - kernel.halfTaps) }

    /// What the source delivered (whole frames).
    public func append(_ samples: some Collection<Float>) {
        queued.append(contentsOf: samples)
        if level > targetFrames + slackFrames {
            let excess = level - targetFrames
            readFrame += excess
            droppedFrames += excess
        }
    }

    /// The source has ended: what is buffered plays out, then `take` reports the end.
    public func finish() {
        sourceEnded = true
        // Silence after the last frame, so the kernel can read up to it.
        queued.append(contentsOf: repeatElement(0, count: kernel.halfTaps * format.channels))
    }

    /// Appends exactly `frames` frames for the timeline: audio, or silence while the source stalls.
    /// False once the source has ended and everything it delivered has been taken.
    public func take(frames: Int, into output: inout [Float]) -> Bool {
        let channels = format.channels
        if !playing {
            if sourceEnded, level == 0 { return false }
            // Resume only with the target buffered (or all there is at the end), so a source that
            // trickles does not flap between sound and silence.
            guard level >= targetFrames || sourceEnded else {
                output.append(contentsOf: repeatElement(0, count: frames * channels))
                silentFrames += frames
                return true
            }
            playing = true
        }
        smoothedLevel += (Double(level) - smoothedLevel) * min(1, smoothing * Double(frames))
        // An ended source has no clock left to follow: its tail plays as it is.
        if sourceEnded { appliedPPM = 0 } else { adjustRate() }
        let step = 1 + Double(appliedPPM) / 1e6
        let start = output.count
        output.append(contentsOf: repeatElement(0, count: frames * channels))
        var produced = 0
        let readable = queuedFrames - kernel.halfTaps
        queued.withUnsafeMutableBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                while produced < frames, readFrame < readable {
                    let frame = UnsafeMutableBufferPointer(rebasing: out[(start + produced * channels)...].prefix(channels))
                    kernel.interpolate(input, channels: channels, at: readFrame, fraction: fraction, into: frame, gain: 1)
                    fraction += step
                    let whole = fraction.rounded(.down)
                    readFrame += Int(whole)
                    fraction -= whole
                    produced += 1
                }
            }
        }
        discardHistory()
        if produced < frames {
            if sourceEnded, produced == 0 {
                output.removeSubrange(start...)
                return false
            }
            // A stall: the rest is silence (already zero), and play waits for the target again.
            if !sourceEnded {
                stalls += 1
                silentFrames += frames - produced
                playing = false
            }
        }
        return true
    }

    /// Frames the kernel will not read again are let go (in batches, not on every chunk).
    private func discardHistory() {
        let unneeded = readFrame - (kernel.halfTaps - 1)
        guard unneeded > 4096 else { return }
        queued.removeFirst(unneeded * format.channels)
        readFrame -= unneeded
    }

    /// Reads faster than real time while the buffer is above its target (the source is fast),
    /// slower while below; in steps of 10 ppm.
    private func adjustRate() {
        let error = (smoothedLevel - Double(targetFrames)) / Double(targetFrames)
        let wanted = max(-1, min(1, error / Self.fullCorrectionError)) * Self.maxCorrectionPPM
        appliedPPM = Int((wanted / 10).rounded()) * 10
    }
}
