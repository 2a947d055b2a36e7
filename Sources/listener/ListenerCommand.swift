import ArgumentParser
import Logging
import PartyCastCLI
import PartyCastClock
import PartyCastCore
import PartyCastDecoder
import PartyCastDSP
import PartyCastOutput
import PartyCastPlayer
import PartyCastSourceRegistry

@main
struct Listener: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Plays PartyCast audio: local files, or a broadcaster on the LAN.",
        subcommands: [Play.self, Join.self, List.self, Devices.self])
}

struct Play: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a file, a pipe or a test tone through parser → decoder → ring → output.",
        discussion: """
            Keys while playing in a terminal: space pause/resume, ←/→ seek ∓10 s, q quit.

            Outputs: alsa[:DEVICE] (default device when no DEVICE), wav:PATH (the decoded stream, as fast \
            as possible), null (decode and discard), virtual:PATH (a simulated sound card in real time, \
            recording what it played to PATH and its clock to PATH.json), auto (ALSA if a device opens, \
            else virtual:partycast-virtual.wav).
            """)

    @Argument(help: ArgumentHelp("\(SourceRegistry.help).", valueName: "source"))
    var source: String

    @Option(name: .customLong("pcm-format"), help: "A pipe carries raw PCM in this layout, RATE:BITS:CHANNELS (without it, a pipe's format is recognised by its bytes and raw PCM is taken as 48000:16:2).")
    var pcmFormat: String?

    @Option(name: .shortAndLong, help: "alsa[:DEVICE] (`listener devices` lists them) | wav:PATH | null | virtual:PATH | auto")
    var output = "auto"

    @Option(help: "Start this many seconds into the stream (exact to the sample for local files).")
    var start: Double?

    @Option(help: "Resample to this rate in Hz (default: the source's own).")
    var rate: Int?

    @Option(help: "Deliver this many channels (default: the source's own).")
    var channels: Int?

    @Flag(name: .shortAndLong, help: "No status line.")
    var quiet = false

    @OptionGroup var logging: LoggingOptions

    func run() throws {
        let logger = logging.bootstrap(program: "listener")
        installInterruptHandler()
        let device = try resolveOutput(output, logger: logger)
        let terminal = Console.isTerminal && !quiet
        var options = PlayerOptions(startSeconds: start)
        options.statusIntervalSeconds = terminal ? 0.1 : 1
        var sourceOptions = SourceOptions()
        sourceOptions.onEvent = { logger.notice("\($0)") }
        if let pcmFormat {
            do { sourceOptions.rawPCM = try RawPCMFormat(parsing: pcmFormat) } catch { throw ValidationError(error.message) }
            sourceOptions.pipesAreRaw = true
        }
        let resolved: ResolvedSource
        do { resolved = try SourceRegistry.resolve(source, options: sourceOptions) } catch { throw exitFailing(error, program: "listener") }
        let (rate, channels) = (self.rate, self.channels)
        let player = Player(output: device, options: options) { () throws(PartyCastError) -> PCMSource in
            let decoded = try resolved.open()
            guard rate != nil || channels != nil else { return decoded }
            return try FormatConverter(source: decoded, sampleRate: rate, channels: channels)
        }
        onInterrupt { player.stop() }
        let keys = KeyReader { key in
            switch key {
            case .space: player.togglePause()
            case .left: player.seek(bySeconds: -10)
            case .right: player.seek(bySeconds: 10)
            case .quit: player.stop()
            }
        }
        let titles = TitleLog(logger: logger)
        player.observe { status in
            if terminal { StatusLine.draw(status, clockBoundMicroseconds: nil) } else { titles.note(status) }
        }
        let reason = player.run()
        keys?.finish()
        if terminal { Console.endStatus() }
        let status = player.status
        if status.skippedBytes > 0 {
            logger.notice("skipped \(status.skippedBytes) bytes that were not audio")
        }
        try finish(reason)
    }
}

/// Exits as the player's stop reason says: 0 for the end of the stream or a quit, else the error's status.
func finish(_ reason: StopReason) throws {
    switch reason {
    case .endOfStream, .user: return
    case .error(let error), .temporary(let error): throw exitFailing(error, program: "listener")
    }
}

/// `auto` plays on ALSA's default device, or says there is none and uses the simulated card.
func resolveOutput(_ output: String, clock: LocalClock = .system, logger: Logger) throws -> AudioOutput {
    guard output == "auto" else {
        do { return try makeOutput(output, clock: clock) } catch { throw ValidationError(error.message) }
    }
    if let problem = ALSAOutput.probe(device: "default") {
        let path = "partycast-virtual.wav"
        logger.notice("no ALSA device to play on (\(problem.message.prefix { $0 != ";" })); playing on the simulated card virtual:\(path) instead")
        return VirtualCardOutput(path: path, clock: clock)
    }
    return ALSAOutput(device: "default", clock: clock)
}
