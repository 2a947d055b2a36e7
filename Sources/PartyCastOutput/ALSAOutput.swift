import CALSA
import PartyCastClock
import PartyCastCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// alsa-lib, opened by the first ALSA device.
let alsaLibrary = loadCLibrary("alsa-lib", code: .output, partycast_alsa_open)

/// One ALSA playback handle. Every alsa-lib call sits behind a small method that turns a negative
/// return into a `PartyCastError` with alsa-lib's own message.
struct ALSAPCM: @unchecked Sendable {
    // @unchecked: a C handle used by one thread at a time: start() opens it, then only the output thread.
    let alsa: PartyCastALSAFunctions
    let handle: OpaquePointer
    let device: String

    static func open(device: String) throws(PartyCastError) -> ALSAPCM {
        var alsa = try alsaLibrary.get()
        partycast_alsa_silence_library_messages(&alsa)
        var handle: OpaquePointer?
        let result = alsa.snd_pcm_open(&handle, device, SND_PCM_STREAM_PLAYBACK, 0)
        guard result >= 0, let handle else {
            throw PartyCastError(.output, "cannot open ALSA device '\(device)': \(message(result, alsa)); \(deviceChoices()), or use --output virtual:PATH")
        }
        return ALSAPCM(alsa: alsa, handle: handle, device: device)
    }

    /// The devices there are, for the error about one that does not open.
    static func deviceChoices() -> String {
        do throws(PartyCastError) {
            let names = try ALSAOutput.playbackDevices().map(\.name)
            return names.isEmpty ? "alsa-lib knows no playback device" : "the devices here: \(names.joined(separator: ", ")) (`listener devices` describes them)"
        } catch {
            return "the devices cannot be listed (\(error.message))"
        }
    }

    /// Float32 interleaved at the stream's rate (alsa-lib converts if the card cannot), with a
    /// buffer of `latencyMicroseconds` split into periods; returns the period in frames.
    func configure(format: AudioFormat, latencyMicroseconds: UInt32) throws(PartyCastError) -> Int {
        try check(alsa.snd_pcm_set_params(handle, SND_PCM_FORMAT_FLOAT_LE, SND_PCM_ACCESS_RW_INTERLEAVED,
                                     UInt32(format.channels), UInt32(format.sampleRate), 1, latencyMicroseconds), "set parameters")
        var bufferSize: snd_pcm_uframes_t = 0
        var periodSize: snd_pcm_uframes_t = 0
        try check(alsa.snd_pcm_get_params(handle, &bufferSize, &periodSize), "read back parameters")
        return Int(periodSize)
    }

    /// Writes frames; after an underrun or suspend it recovers and reports it (count > 0 written).
    func write(_ samples: UnsafeBufferPointer<Float>, frames: Int) -> (written: Int, recovered: Bool, error: Int32) {
        let result = alsa.snd_pcm_writei(handle, samples.baseAddress, snd_pcm_uframes_t(frames))
        if result >= 0 { return (Int(result), false, 0) }
        let recovered = alsa.snd_pcm_recover(handle, Int32(result), 1)
        return (0, recovered >= 0, recovered >= 0 ? 0 : recovered)
    }

    /// Frames queued in the device ahead of what is heard now.
    func delay() -> Int {
        var frames: snd_pcm_sframes_t = 0
        return alsa.snd_pcm_delay(handle, &frames) >= 0 ? Int(frames) : 0
    }

    /// Waits (up to `timeoutMilliseconds`) until `frames` fit, then says how many fit and how many
    /// are queued ahead of them, read together; after an underrun it recovers first.
    func waitForRoom(_ frames: Int, timeoutMilliseconds: Int32) -> (room: Int, delay: Int, error: Int32) {
        var avail: snd_pcm_sframes_t = 0
        var delay: snd_pcm_sframes_t = 0
        var result = alsa.snd_pcm_avail_delay(handle, &avail, &delay)
        // PulseAudio's plugin answers EIO until the first write: nothing is queued yet, so there is room.
        if result < 0 && alsa.snd_pcm_state(handle) == SND_PCM_STATE_PREPARED { return (frames, 0, 0) }
        if result >= 0 && avail < frames {
            _ = alsa.snd_pcm_wait(handle, timeoutMilliseconds)
            result = alsa.snd_pcm_avail_delay(handle, &avail, &delay)
        }
        if result < 0 {
            let recovered = alsa.snd_pcm_recover(handle, result, 1)
            return (0, 0, recovered < 0 ? recovered : 0)
        }
        return (Int(avail), Int(delay), 0)
    }

    /// Blocks until the queued frames were heard; a negative error code when the device failed first.
    func drain() -> Int32 { alsa.snd_pcm_drain(handle) }
    /// alsa-lib frees the handle whatever it returns: nothing is left to retry or report.
    func close() { _ = alsa.snd_pcm_close(handle) }

    func check(_ result: Int32, _ what: String) throws(PartyCastError) {
        guard result < 0 else { return }
        throw PartyCastError(.output, "ALSA device '\(device)': cannot \(what): \(message(result))")
    }

    func message(_ code: Int32) -> String { Self.message(code, alsa) }
    static func message(_ code: Int32, _ alsa: PartyCastALSAFunctions) -> String {
        alsa.snd_strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}

/// `alsa[:DEVICE]`: plays on a real (or alsa-lib plugin) device from a dedicated thread.
public final class ALSAOutput: AudioOutput {
    public let device: String
    public let clock: LocalClock
    public static let latencyMicroseconds: UInt32 = 100_000
    private let thread = OutputThread()
    private let drainOnStop = Atomic<Bool>(false)
    private let delayFrames = Atomic<Int>(0)
    private let recoveries = Atomic<Int>(0)

    public var name: String { "alsa:\(device)" }
    public var isRealTime: Bool { true }
    public var latencyFrames: Int { delayFrames.load(ordering: .relaxed) }
    /// Underruns the device reported and `snd_pcm_recover` repaired.
    public var recoveredUnderruns: Int { recoveries.load(ordering: .relaxed) }
    public var outcome: OutputOutcome? { thread.outcome }

    public init(device: String, clock: LocalClock = .system) {
        self.device = device
        self.clock = clock
    }

    /// Whether `device` can be opened for playback now; the error says why not.
    public static func probe(device: String) -> PartyCastError? {
        do throws(PartyCastError) {
            try ALSAPCM.open(device: device).close()
            return nil
        } catch {
            return error
        }
    }

    public func start(format: AudioFormat, renderer: Renderer, onEnd: @escaping @Sendable () -> Void) throws(PartyCastError) {
        guard thread.canStart else { return }
        let pcm = try ALSAPCM.open(device: device)
        let period: Int
        do {
            period = max(try pcm.configure(format: format, latencyMicroseconds: Self.latencyMicroseconds), 64)
        } catch {
            pcm.close()
            throw error
        }
        let started = thread.start(onEnd: onEnd) { [self] in run(pcm: pcm, renderer: renderer, format: format, period: period) }
        if !started { pcm.close() }
    }

    private func run(pcm: ALSAPCM, renderer: Renderer, format: AudioFormat, period: Int) -> OutputOutcome {
        let channels = format.channels
        let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: period * channels)
        defer { buffer.deallocate(); pcm.close() }
        var finished = false
        while !finished && !thread.isStopRequested {
            // Render only once the period fits, so what is queued ahead of it (the delay) says
            // when its first frame will be heard.
            let (room, queued, failure) = pcm.waitForRoom(period, timeoutMilliseconds: 100)
            if failure < 0 {
                return .failed(PartyCastError(.output, "ALSA device '\(pcm.device)' failed: \(pcm.message(failure))"))
            }
            guard room >= period else { continue }
            let heardAt = clock.now() + Int64(queued) * 1_000_000_000 / Int64(format.sampleRate)
            if case .finished = renderer.render(into: buffer, heardAt: heardAt) { finished = true }
            var offset = 0
            while offset < period {
                let (written, recovered, error) = pcm.write(UnsafeBufferPointer(rebasing: buffer[(offset * channels)...]), frames: period - offset)
                if error < 0 {
                    return .failed(PartyCastError(.output, "ALSA device '\(pcm.device)' failed: \(pcm.message(error))"))
                }
                if recovered { recoveries.add(1, ordering: .relaxed) }
                offset += written
            }
            delayFrames.store(pcm.delay(), ordering: .relaxed)
        }
        if finished || drainOnStop.load(ordering: .acquiring) {
            let drained = pcm.drain()
            // The song's last period never reached the speaker: the end is a failure, not a finish.
            if drained < 0 { return .failed(PartyCastError(.output, "ALSA device '\(pcm.device)' failed while draining: \(pcm.message(drained))")) }
        }
        return finished ? .finished : .stopped
    }

    public func stop(drain: Bool) {
        drainOnStop.store(drain, ordering: .releasing)
        thread.stop()
    }
}

/// A playback device as `aplay -L` lists it: the name `alsa:` takes, and alsa-lib's description.
public struct ALSADevice: Sendable, Equatable {
    public let name: String
    public let description: String?
}

extension ALSAOutput {
    /// The PCM devices alsa-lib's configuration offers for playback, in its order: its name hints
    /// but those for capture only, as `aplay -L` lists them.
    public static func playbackDevices() throws(PartyCastError) -> [ALSADevice] {
        var alsa = try alsaLibrary.get()
        partycast_alsa_silence_library_messages(&alsa)
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        let result = alsa.snd_device_name_hint(-1, "pcm", &hints)
        guard result >= 0, let hints else {
            throw PartyCastError(.output, "cannot list the ALSA devices: \(ALSAPCM.message(result, alsa))")
        }
        defer { _ = alsa.snd_device_name_free_hint(hints) }
        /// One field of a hint; alsa-lib hands over a copy for the caller to free.
        func field(_ entry: UnsafeMutableRawPointer, _ id: String) -> String? {
            guard let text = alsa.snd_device_name_get_hint(entry, id) else { return nil }
            defer { free(text) }
            return String(cString: text)
        }
        var devices: [ALSADevice] = []
        var index = 0
        while let entry = hints[index] {
            index += 1
            // No IOID: both directions.
            if let direction = field(entry, "IOID"), direction != "Output" { continue }
            guard let name = field(entry, "NAME") else { continue }
            devices.append(ALSADevice(name: name, description: field(entry, "DESC")))
        }
        return devices
    }
}
