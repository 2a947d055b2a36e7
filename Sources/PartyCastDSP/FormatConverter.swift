import CSpeexDSP
import PartyCastCore

/// Wraps a PCM source to deliver another channel count and/or sample rate (`--channels`, `--rate`).
/// Channels: mono is copied to every channel; many channels to mono are averaged; otherwise the
/// first channels are kept and missing ones are silent. Rate: libspeexdsp's resampler (quality 5),
/// with its latency removed at the start and flushed at the end, so the length is exactly
/// `frames × to / from`.
public final class FormatConverter: PCMSource {
    private let source: PCMSource
    private let targetRate: Int?
    private let targetChannels: Int?
    private var resampler: OpaquePointer?
    private var mixed: [Float] = []
    private var input: [Float] = []
    private var inputFramesSeen = 0
    private var outputFramesGiven = 0
    private var flushed = false

    public init(source: PCMSource, sampleRate: Int?, channels: Int?) throws(PartyCastError) {
        if let sampleRate, !(8000...384_000).contains(sampleRate) {
            throw PartyCastError(.invalidArgument, "--rate \(sampleRate): choose a rate from 8000 to 384000 Hz")
        }
        if let channels, !(1...8).contains(channels) {
            throw PartyCastError(.invalidArgument, "--channels \(channels): choose 1 to 8 channels")
        }
        self.source = source
        self.targetRate = sampleRate
        self.targetChannels = channels
    }

    deinit { if let resampler { speex_resampler_destroy(resampler) } }

    public var tags: TrackTags { source.tags }
    public var isSeekable: Bool { source.isSeekable }
    public var skippedBytes: Int64 { source.skippedBytes }
    public var cover: CoverArt? { source.cover }
    public var wakeProducer: (@Sendable () -> Void)? { source.wakeProducer }

    public var format: AudioFormat? {
        source.format.map { AudioFormat(sampleRate: targetRate ?? $0.sampleRate, channels: targetChannels ?? $0.channels) }
    }

    public var duration: Duration {
        switch source.duration {
        case .unknown: return .unknown
        case .estimated(let frames): return .estimated(frames: outputFrames(forInput: frames))
        case .exact(let frames): return .exact(frames: outputFrames(forInput: frames))
        }
    }

    private var rates: (from: Int, to: Int)? {
        guard let from = source.format?.sampleRate, let to = targetRate, from != to else { return nil }
        return (from, to)
    }

    private func outputFrames(forInput frames: Int) -> Int {
        guard let (from, to) = rates else { return frames }
        return Int((Int64(frames) * Int64(to) + Int64(from) / 2) / Int64(from))
    }

    public func prepare() throws(PartyCastError) {
        try source.prepare()
        try makeResampler()
    }

    private func makeResampler() throws(PartyCastError) {
        guard resampler == nil, let (from, to) = rates, let channels = format?.channels else { return }
        var error: Int32 = 0
        guard let state = speex_resampler_init(UInt32(channels), UInt32(from), UInt32(to), 5, &error) else {
            throw PartyCastError(.decoder, "cannot resample \(from) → \(to) Hz: \(String(cString: speex_resampler_strerror(error)))")
        }
        speex_resampler_skip_zeros(state)
        resampler = state
    }

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        guard let sourceFormat = source.format, let target = format else { return false }
        mixed.removeAll(keepingCapacity: true)
        if flushed { return false }
        let more = try source.produce(into: &mixed)
        remix(&mixed, from: sourceFormat.channels, to: target.channels)
        guard let resampler else {
            buffer.append(contentsOf: mixed)
            return more
        }
        inputFramesSeen += mixed.count / target.channels
        if !more {
            // Push the resampler's remaining latency through with silence, then stop at the exact length.
            flushed = true
            mixed.append(contentsOf: repeatElement(0, count: Int(speex_resampler_get_input_latency(resampler)) * target.channels))
        }
        let expectedTotal = outputFrames(forInput: inputFramesSeen)
        var inputFrames = UInt32(mixed.count / target.channels)
        let room = Int(inputFrames) * target.sampleRate / max(sourceFormat.sampleRate, 1) + 64
        let start = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: room * target.channels))
        var outputFrames = UInt32(room)
        buffer.withUnsafeMutableBufferPointer { out in
            mixed.withUnsafeBufferPointer { inp in
                _ = speex_resampler_process_interleaved_float(resampler, inp.baseAddress, &inputFrames, out.baseAddress! + start, &outputFrames)
            }
        }
        var produced = Int(outputFrames)
        if flushed { produced = min(produced, max(0, expectedTotal - outputFramesGiven)) }
        buffer.removeSubrange((start + produced * target.channels)...)
        outputFramesGiven += produced
        return true
    }

    private func remix(_ samples: inout [Float], from: Int, to: Int) {
        guard from != to else { return }
        let frames = samples.count / from
        var out = [Float](repeating: 0, count: frames * to)
        for f in 0..<frames {
            if to == 1 {
                var sum: Float = 0
                for c in 0..<from { sum += samples[f * from + c] }
                out[f] = sum / Float(from)
            } else if from == 1 {
                for c in 0..<to { out[f * to + c] = samples[f] }
            } else {
                for c in 0..<min(from, to) { out[f * to + c] = samples[f * from + c] }
            }
        }
        samples = out
    }

    public func seek(toFrame frame: Int) throws(PartyCastError) {
        guard let (from, to) = rates else { return try source.seek(toFrame: frame) }
        let sourceFrame = Int(Int64(frame) * Int64(from) / Int64(to))
        try source.seek(toFrame: sourceFrame)
        if let resampler {
            speex_resampler_reset_mem(resampler)
            speex_resampler_skip_zeros(resampler)
        }
        inputFramesSeen = sourceFrame
        outputFramesGiven = outputFrames(forInput: sourceFrame)
        flushed = false
    }
}
