import ArgumentParser
import Logging
import PartyCastCLI
import PartyCastClock
import PartyCastCore
import PartyCastDiscovery
import PartyCastNetwork
import PartyCastOutput
import PartyCastPlayer
import PartyCastSendspin
import PartyCastSendspinClient
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// True at most once per interval: for periodic reports from a frequently called observer.
final class Throttle: Sendable {
    private let interval: UInt64
    private let last = Atomic<UInt64>(0)
    init(nanoseconds: UInt64) { interval = nanoseconds }
    func due() -> Bool {
        let now = monotonicNanoseconds()
        let previous = last.load(ordering: .relaxed)
        guard now - previous >= interval else { return false }
        return last.compareExchange(expected: previous, desired: now, ordering: .relaxed).exchanged
    }
}

extension ChannelAssignment: ExpressibleByArgument {}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the parties on the LAN (via mDNS): PartyCast broadcasters and Sendspin servers.",
        discussion: "One line each: name, host, address:port, the protocol it speaks, then what it says of itself.")

    @Option(help: "Seconds to listen for answers.")
    var timeout = 2.0

    @OptionGroup var logging: LoggingOptions

    func run() throws {
        let logger = logging.bootstrap(program: "listener")
        let broadcasters: [DiscoveredService], sendspinServers: [DiscoveredService]
        do {
            broadcasters = try ServiceBrowser.browse(timeout: timeout)
            sendspinServers = try ServiceBrowser.browse(type: PartyCastService.sendspinServerType, timeout: timeout)
        } catch {
            throw exitFailing(error, program: "listener")
        }
        if broadcasters.isEmpty && sendspinServers.isEmpty {
            logger.notice("no broadcasters found on the LAN (is one running, and avahi-daemon on both machines?)")
        }
        // Everything here came over mDNS from any machine on the LAN: made safe to print.
        func line(_ fields: [String]) { Console.output(fields.map { String(untrusted: $0, limit: 80) }.joined(separator: "\t")) }
        for service in broadcasters {
            line([service.name, service.hostName, "\(service.address):\(service.port)", "partycast",
                  "codec=\(service.txt["codec"] ?? "?")", "listeners=\(service.txt["listeners"] ?? "?")",
                  service.txt["key"] == "required" ? "private (needs --key)" : "public"])
        }
        for service in sendspinServers {
            // The spec's TXT `path` (default /sendspin): what `join --sendspin` takes.
            let path = service.txt["path"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/sendspin"
            line([service.name, service.hostName, "\(service.address):\(service.port)", "sendspin",
                  "join --sendspin ws://\(service.address):\(service.port)\(path)"])
        }
    }
}

struct Join: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Join a broadcaster and play what it streams.",
        discussion: "Finds NAME (or the only broadcaster) by mDNS, or connects to --host directly; reconnects with backoff when the connection drops.")

    @Argument(help: "The broadcaster's name (as `listener list` shows it); omitted or empty: the only one on the LAN.")
    var name: String?

    @Option(help: "Connect to HOST[:PORT] directly, without mDNS.")
    var host: String?

    @Option(help: ArgumentHelp("Play from the Sendspin server at URL (Music Assistant, `sendspin serve`) instead of a PartyCast broadcaster.",
                               valueName: "ws://HOST:PORT/sendspin"))
    var sendspin: String?

    @Option(name: .shortAndLong, help: "alsa[:DEVICE] (`listener devices` lists them) | wav:PATH | null | virtual:PATH | auto")
    var output = "auto"

    @Flag(help: "Exit 0 when the broadcast ends instead of waiting for the next one.")
    var once = false

    @Option(help: "The name the broadcaster shows for this listener (default: the host name).")
    var listenerName: String?

    @Flag(name: .shortAndLong, help: "No status line.")
    var quiet = false

    @Option(name: .customLong("latency-offset"), help: "Milliseconds this speaker adds after the sound card (a Bluetooth or AV-receiver delay); played that much earlier.")
    var latencyOffsetMilliseconds = 0.0

    @Flag(name: .customLong("no-sync"), help: "Play as soon as audio arrives: lowest latency, not in step with other listeners.")
    var noSync = false

    @Option(help: ArgumentHelp("Which of the broadcast's channels to play on every output channel: two listeners set left and right are a stereo pair (the remote can change it).",
                               valueName: ChannelAssignment.names))
    var channel = ChannelAssignment.stereo

    @Option(help: ArgumentHelp(
        "Where the party's volume is applied: software (in the samples), hardware (on the output card's mixer control CONTROL, else its first playback volume control, such as Master or PCM: the samples keep their full resolution) or none (full scale, for an amplifier with its own volume knob). hardware and none need an alsa output.",
        valueName: MixerChoice.names))
    var mixer = "software"

    @OptionGroup var key: PartyKeyOptions

    @OptionGroup var logging: LoggingOptions

    @Option(name: .customLong("simulate-clock"), help: ArgumentHelp(
        "Run this listener's clock (clock sync and virtual: card) OFFSET seconds off and DRIFT ppm fast (at most ±500) against the machine's, to test sync on one machine.",
        valueName: "OFFSET_S,DRIFT_PPM"))
    var simulateClock: String?

    @Option(name: .customLong("clock-log"), help: ArgumentHelp(
        "Write every clock exchange to FILE, to replay with partycast-clock-sim --replay.", valueName: "FILE"))
    var clockLog: String?

    func validate() throws {
        if simulateClock != nil { _ = try simulatedClock() }
        if let sendspin {
            do { _ = try SendspinURL(parsing: sendspin) } catch { throw ValidationError("--sendspin: \(error.message)") }
            // An empty NAME is none: the packaged service passes its PARTYCAST_PARTY, empty or not.
            guard host == nil, name?.isEmpty ?? true else { throw ValidationError("--sendspin names the server: no NAME or --host with it") }
        }
        guard abs(latencyOffsetMilliseconds) <= 2000 else { throw ValidationError("--latency-offset takes −2000…2000 ms") }
        do { _ = try MixerChoice(parsing: mixer) } catch { throw ValidationError(error.message) }
    }

    /// Where the party's volume goes (`--mixer`): only an ALSA output has a mixer, or a volume to leave alone.
    private func volumeApplication(on device: AudioOutput) throws -> VolumeApplication {
        let choice: MixerChoice
        do { choice = try MixerChoice(parsing: mixer) } catch { throw ValidationError(error.message) }
        if choice == .software { return .software }
        guard let alsa = device as? ALSAOutput else {
            throw ValidationError("--mixer \(mixer) needs an alsa output (--output alsa[:DEVICE]): \(device.name) has no mixer, and its volume is in its samples")
        }
        guard case .hardware(let control) = choice else { return .none }
        do { return .hardware(try ALSAMixer.open(device: alsa.device, control: control)) } catch { throw exitFailing(error, program: "listener") }
    }

    /// The listener's clock: the machine's, or the simulated one --simulate-clock asks for.
    private func simulatedClock() throws -> LocalClock {
        guard let simulateClock else { return .system }
        let parts = simulateClock.split(separator: ",", omittingEmptySubsequences: false)
        // A drift steeper than the clock sync follows would be a test of nothing but the clamp.
        let steepest = ClockEstimator.maximumDrift * 1e6
        guard parts.count == 2, let offset = Double(parts[0]), let drift = Double(parts[1]),
              abs(offset) <= 86_400, abs(drift) <= steepest else {
            throw ValidationError("--simulate-clock takes OFFSET_S,DRIFT_PPM, e.g. --simulate-clock=-3,-120 (|offset| ≤ 1 day, |drift| ≤ \(Int(steepest)) ppm, the most clock sync follows; crystals are good to ~100)")
        }
        return LocalClock(offsetSeconds: offset, driftPPM: drift)
    }

    func run() throws {
        let logger = logging.bootstrap(program: "listener")
        // Before anything that can take a while (mDNS, connecting): Ctrl-C is a clean stop from here on.
        installInterruptHandler()
        let clock = try simulatedClock()
        let device = try resolveOutput(output, clock: clock, logger: logger)
        var playerOptions = PlayerOptions()
        playerOptions.volume = try volumeApplication(on: device)
        playerOptions.sync = !noSync
        playerOptions.latencyOffsetSeconds = latencyOffsetMilliseconds / 1000
        playerOptions.channel = channel
        // The broadcaster already sends ahead (its --buffer); in party mode the schedule decides
        // when to play, so a little audio in hand is enough to start.
        playerOptions.prebufferSeconds = noSync ? 0.1 : 0.02
        // Decoded audio in hand (a ring of 1.37 s): more than the broadcaster's default lead (1 s);
        // what a longer --buffer sends ahead waits in the inbox as it came.
        playerOptions.bufferSeconds = 1
        let terminal = Console.isTerminal && !quiet
        // A status line ten times a second; without one, the broadcaster's report once a second.
        playerOptions.statusIntervalSeconds = terminal ? 0.1 : 1
        var exchangeLog: ClockExchangeLog?
        if let clockLog {
            do { exchangeLog = try ClockExchangeLog(path: clockLog, clock: clock) } catch { throw exitFailing(error, program: "listener") }
        }
        let party: JoinedParty
        if let sendspin {
            party = try sendspinParty(URL: sendspin, clock: clock, clockLog: exchangeLog, logger: logger)
        } else {
            party = try nativeParty(clock: clock, clockLog: exchangeLog, playsInTime: device.isRealTime, logger: logger)
        }
        let player = Player(output: device, options: playerOptions, source: party.open)
        let control = party.control
        // The player first, so whatever the source throws once cancelled counts as the user's stop.
        @Sendable func quit() {
            player.stop()
            control.cancel()
        }
        onInterrupt(quit)
        let keys = KeyReader { if $0 == .quit { quit() } }
        let reports = Throttle(nanoseconds: 1_000_000_000)
        let lastState = Mutex(PlayerState.idle)
        let titles = TitleLog(logger: logger)
        player.observe { status in
            if lastState.withLock({ last in defer { last = status.state }; return last != status.state }) {
                logger.debug("player: \(status.state)\(status.syncErrorMicroseconds.map { ", sync error \($0) µs" } ?? "")")
            }
            if !terminal { titles.note(status) }
            if reports.due() { control.report(status) }
            if terminal {
                StatusLine.draw(status, clockBoundMicroseconds: control.clockBoundMicroseconds, clockSettling: control.clockSettling)
            }
        }
        let reason = player.run()
        keys?.finish()
        if terminal { Console.endStatus() }
        try finish(reason)
    }

    /// A PartyCast broadcaster's party: found by mDNS or --host, over the native protocol.
    private func nativeParty(clock: LocalClock, clockLog: ClockExchangeLog?, playsInTime: Bool, logger: Logger) throws -> JoinedParty {
        let resolver: EndpointResolver
        do { resolver = try endpointResolver(logger: logger) } catch let error as PartyCastError {
            if interrupted.load(ordering: .relaxed) { throw ExitCode.success }
            throw exitFailing(error, program: "listener")
        }
        var options = NetworkSource.Options(listenerName: listenerName ?? localHostName(), hostName: localHostName())
        options.once = once
        options.clock = clock
        options.sync = !noSync
        options.key = try key.key
        let control = NetworkSource.Control(clock: clock, clockLog: clockLog, playsInTime: playsInTime)
        return JoinedParty(control: control) { [options] () throws(PartyCastError) -> PCMSource in
            NetworkSource(options: options, control: control, logger: logger, resolve: resolver)
        }
    }

    /// A Sendspin server's group, as one more of its players.
    private func sendspinParty(URL text: String, clock: LocalClock, clockLog: ClockExchangeLog?, logger: Logger) throws -> JoinedParty {
        let url: SendspinURL
        do { url = try SendspinURL(parsing: text) } catch { throw ValidationError("--sendspin: \(error.message)") }
        guard try key.key == nil else { throw ValidationError("--key is a PartyCast party's secret: a Sendspin server asks for none") }
        var options = SendspinSource.Options(url: url, playerName: listenerName ?? localHostName())
        options.once = once
        options.clock = clock
        let control = SendspinSource.Control(clock: clock, clockLog: clockLog)
        return JoinedParty(control: control) { [options] () throws(PartyCastError) -> PCMSource in
            SendspinSource(options: options, control: control, logger: logger)
        }
    }

    /// How to find the broadcaster before each (re)connection.
    private func endpointResolver(logger: Logger) throws -> EndpointResolver {
        if let host {
            let parsed: HostAndPort
            do { parsed = try HostAndPort(parsing: host[...], defaultPort: 7360) } catch {
                throw ValidationError("--host takes HOST, HOST:PORT or [IPv6]:PORT: \(error.message)")
            }
            return { () throws(PartyCastError) in (parsed.host, parsed.port) }
        }
        // Empty is how a service's configuration leaves the name out.
        let wanted = name.flatMap { $0.isEmpty ? nil : $0 }
        // Pick now, so "which one?" is asked once; reconnections look for the same name.
        let found = try wanted.map { try browse(waitingFor: $0, logger: logger) } ?? ServiceBrowser.browse(timeout: 2)
        let chosen = try choose(from: found, wanted: wanted)
        return { () throws(PartyCastError) in
            // Not waiting for the name: a reconnection backs off and looks again, and Ctrl-C must
            // not sit out a browse.
            let found = try ServiceBrowser.browse(timeout: 2)
            guard let service = found.first(where: { $0.name == chosen.name }) else {
                throw PartyCastError(.io, "\"\(String(untrusted: chosen.name, limit: 60))\" is not on the LAN right now")
            }
            return (service.address, service.port)
        }
    }

    /// How long a listener told a name waits for it: a broadcaster started at the same moment
    /// publishes a second or two later (its start-up, then avahi's probes), when the first browse
    /// may already have ended, and a party's machines are often switched on together.
    static let nameWait = 30.0

    /// The LAN's broadcasters once `wanted` is among them, or when `nameWait` has passed (or Ctrl-C):
    /// browsed a second at a time, so an interrupt is heard.
    private func browse(waitingFor wanted: String, logger: Logger) throws -> [DiscoveredService] {
        var found = try ServiceBrowser.browse(timeout: 2)
        guard !found.contains(where: { $0.name == wanted }) else { return found }
        logger.notice("waiting up to \(Int(Self.nameWait)) s for \"\(wanted)\" to appear on the LAN")
        let deadline = monotonicNanoseconds() + UInt64(Self.nameWait * 1e9)
        while !found.contains(where: { $0.name == wanted }), monotonicNanoseconds() < deadline, !interrupted.load(ordering: .relaxed) {
            found = try ServiceBrowser.browse(timeout: 1, waitingFor: wanted)
        }
        return found
    }

    private func choose(from found: [DiscoveredService], wanted: String?) throws -> DiscoveredService {
        if let wanted {
            guard let match = found.first(where: { $0.name == wanted }) else {
                throw PartyCastError(.io, "no broadcaster named \"\(wanted)\" on the LAN; `listener list` shows those there are")
            }
            return match
        }
        switch found.count {
        case 0: throw PartyCastError(.io, "no broadcasters found on the LAN; start one with `broadcaster share`, or give --host")
        case 1: return found[0]
        default:
            for (i, service) in found.enumerated() {
                Console.line("  \(i + 1). " + String(untrusted: "\(service.name)  (\(service.hostName), \(service.address):\(service.port))", limit: 120))
            }
            guard isatty(STDIN_FILENO) == 1 else {
                throw PartyCastError(.invalidArgument, "\(found.count) broadcasters found; name the one to join")
            }
            Console.prompt("join which one? ")
            guard let line = readLine(), let pick = Int(line), found.indices.contains(pick - 1) else {
                throw PartyCastError(.invalidArgument, "no broadcaster chosen")
            }
            return found[pick - 1]
        }
    }
}

/// What `join` needs of a party, whichever protocol it speaks: its source for the player, and the
/// side other threads hold (stop it, report to it, the clock's bound for the status line).
struct JoinedParty {
    let control: any PartyControlSide
    let open: @Sendable () throws(PartyCastError) -> PCMSource
}

protocol PartyControlSide: Sendable {
    func cancel()
    func report(_ status: PlayerStatus)
    var clockBoundMicroseconds: Int? { get }
    var clockSettling: Bool { get }
}

extension NetworkSource.Control: PartyControlSide {
    func report(_ status: PlayerStatus) {
        report(bufferMilliseconds: status.bufferedMilliseconds, syncErrorMicroseconds: status.syncErrorMicroseconds,
               latencyOffsetMilliseconds: status.latencyOffsetMilliseconds, channel: status.channel)
    }
}

extension SendspinSource.Control: PartyControlSide {
    /// A Sendspin server hears a player's volume and mute, which its commands set: nothing more to tell.
    func report(_ status: PlayerStatus) {}
}
