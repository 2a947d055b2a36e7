import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
import PartyCastBroadcast
import PartyCastCLI
import PartyCastCodec
import PartyCastControl
import PartyCastControlSeam
import PartyCastCore
import PartyCastDecoder
import PartyCastSourceRegistry
import PartyCastDiscovery
import PartyCastMPD
import PartyCastSendspin
import PartyCastSendspinServer
import PartyCastWire
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

@main
struct BroadcasterCLI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcaster",
        abstract: "Shares audio with every PartyCast listener on the LAN.",
        subcommands: [Share.self, Ctl.self])
}

struct Share: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode the sources in order, encode once, and stream to every listener that joins.")

    @Argument(help: ArgumentHelp("Sources, played in order: \(SourceRegistry.help); a folder plays the audio files under it in name order.", valueName: "source"))
    var sources: [String]

    @Option(name: .customLong("pcm-format"), help: "A pipe carries raw PCM in this layout, RATE:BITS:CHANNELS (without it, a pipe's format is recognised by its bytes and raw PCM is taken as 48000:16:2).")
    var pcmFormat: String?

    @Option(help: ArgumentHelp("mpd's address, HOST[:PORT] (port 6600 unless given), when the one source is the pipe mpd's fifo output writes: the party shows mpd's song (title, artist, album, cover) and its pauses, and the remote's and ctl's pause, resume, next, previous and seek go to mpd. The pipe is raw PCM as --pcm-format says (default 48000:16:2, mpd's format \"48000:16:2\").", valueName: "host:port"))
    var mpd: String?

    @Option(help: "The title the remotes and listeners show for a pipe (without --mpd, which names each song).")
    var title: String?

    @Option(help: "The name listeners see and join by (default: \"PartyCast on HOST\").")
    var name: String?

    @Option(help: "TCP port (0 picks a free one).")
    var port = 7360

    @Option(help: "The address both ports listen on (default: every address of this machine; 127.0.0.1 keeps the party on this machine).")
    var bind = "0.0.0.0"

    @Option(name: .customLong("control-port"), help: "The remote control's port: the web page and HTTP API (default: the stream port + 1, or a free one if that is taken; 0 picks a free one).")
    var controlPort: Int?

    @Option(help: "opus (48 kHz, 20 ms packets), pcm (lossless Float32 at the first source's rate) or mp3 (MP3 files' own frames, decoded by each listener as mpg123 does; other sources, and MP3s of another rate than the first, are skipped with a line).")
    var codec = "opus"

    @Option(help: "Opus bitrate in kbit/s.")
    var bitrate = 128

    @Option(name: .customLong("start-in"), help: "Start playback this many seconds after launch, so early joiners all start at the first sample.")
    var startIn = 1.0

    @Option(name: .customLong("settle-wait"), help: "Hold the start up to this many seconds more while the clock of a listener joined by then has not settled (on Wi-Fi, its first seconds are its worst); 0 never holds it.")
    var settleWait = 8.0

    @Option(help: "Milliseconds of audio sent ahead of playback: the network stall every listener rides out (see README).")
    var buffer = 1000

    @Flag(help: "Start over after the last source.")
    var loop = false

    @Option(help: "A folder of audio files the remote may add to the queue (besides the sources given here).")
    var library: String?

    @Flag(name: .customLong("no-mdns"), help: "Do not advertise over mDNS; listeners must use --host.")
    var noMDNS = false

    @Option(name: .customLong("sendspin-port"), help: "The Sendspin server's port, where Sendspin players (Music Assistant's speakers, `sendspin daemon`) join at ws://HOST:PORT/sendspin (default 8927, or a free one if that is taken; 0 picks a free one).")
    var sendspinPort: Int?

    @Flag(name: .customLong("no-sendspin"), help: "Do not serve Sendspin players.")
    var noSendspin = false

    @Flag(name: .customLong("sendspin"), help: "Serve Sendspin players at a private party too: they join without the party key.")
    var sendspin = false

    @Option(name: .customLong("sendspin-player"), help: ArgumentHelp(
        "Dial a Sendspin player that waits for servers (`sendspin daemon` without --url) and play the party on it, dialling again whenever it goes away; repeatable (port 8928 unless given).",
        valueName: "ws://HOST[:PORT]/sendspin"))
    var sendspinPlayers: [String] = []

    /// Players dialled at once, at most: each holds a connection and a few seconds of audio.
    static let maxDialledPlayers = 16

    @OptionGroup var key: PartyKeyOptions

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard WireCodecs.named(codec) != nil else {
            throw ValidationError("--codec \(codec): choose \(WireCodecs.all.map(\.name).joined(separator: " or "))")
        }
        guard !sources.isEmpty else { throw ValidationError("give at least one source") }
        let (starts, waits, leads) = (BroadcastOptions.startInRange, BroadcastOptions.settleWaitRange, BroadcastOptions.leadRange)
        guard starts.contains(startIn) else { throw ValidationError("--start-in must be \(Int(starts.lowerBound))…\(Int(starts.upperBound)) seconds") }
        guard waits.contains(settleWait) else { throw ValidationError("--settle-wait must be \(Int(waits.lowerBound))…\(Int(waits.upperBound)) seconds") }
        guard leads.contains(buffer) else { throw ValidationError("--buffer must be \(leads.lowerBound)…\(leads.upperBound) ms") }
        guard !(sendspin && noSendspin) else { throw ValidationError("--sendspin and --no-sendspin contradict each other") }
        guard (0...65535).contains(sendspinPort ?? 0) else { throw ValidationError("--sendspin-port must be 0…65535") }
        _ = try dialledPlayers()
        guard sendspinPlayers.isEmpty || !noSendspin else { throw ValidationError("--sendspin-player plays the party over Sendspin, which --no-sendspin turns off") }
        if mpd != nil {
            guard sources.count == 1, SourceRegistry.isPipe(sources[0]) else {
                throw ValidationError("--mpd follows the pipe mpd writes to: give that pipe alone, e.g. pipe:/tmp/snapfifo")
            }
            guard title == nil else { throw ValidationError("--title and --mpd: mpd names each song itself") }
            guard !WireCodecs.named(codec)!.passesThrough else { throw ValidationError("--codec \(codec) sends MP3 files' frames; mpd's pipe is PCM (use opus or pcm)") }
        }
        if title != nil, !sources.contains(where: SourceRegistry.isPipe) { throw ValidationError("--title names a pipe (- or pipe:PATH); give one") }
    }

    private func dialledPlayers() throws -> [SendspinURL] {
        guard sendspinPlayers.count <= Self.maxDialledPlayers else { throw ValidationError("--sendspin-player: at most \(Self.maxDialledPlayers) players") }
        return try sendspinPlayers.map { text in
            do throws(PartyCastError) { return try SendspinURL(parsing: text, defaultPort: SendspinURL.playerPort) } catch {
                throw ValidationError("--sendspin-player: \(error.message)")
            }
        }
    }

    func run() async throws {
        let logger = logging.bootstrap(program: "broadcaster")
        // Ctrl-C and SIGTERM are the service group's (below); a listener gone mid-write must not kill us.
        ignoreBrokenPipes()
        let partyKey = try key.key
        do {
            try await share(partyKey: partyKey, logger: logger)
        } catch let error as PartyCastError {
            throw exitFailing(error, program: "broadcaster")
        }
    }

    /// Sets the party up, then runs it as one service group: the stream's server, the remote
    /// control, the mDNS advertisement, the terminal's keys and status, and the pacer. Ctrl-C or
    /// SIGTERM shut the group down gracefully, the pacer first (it says goodbye to every listener),
    /// within `shutdownDeadline`; so does the end of the queue, or `q`.
    private func share(partyKey: PartyKey?, logger: Logger) async throws {
        let host = localHostName()
        var options = BroadcastOptions(name: name ?? "PartyCast on \(host)")
        options.codec = WireCodecs.named(codec)!
        options.bitrateKbps = bitrate
        options.startInSeconds = startIn
        options.settleWaitSeconds = settleWait
        options.leadMilliseconds = buffer
        options.loop = loop
        let playable = try playableSources(options: sourceOptions(logger: logger), logger: logger)
        let fanout = Fanout(logger: logger)
        do {
            try raiseOpenFileLimit()
        } catch {
            logger.warning("cannot raise the open-file limit (\(error)): fewer listeners and remotes may connect at once")
        }
        let sourceOptions = try self.sourceOptions(logger: logger)
        let mpdLink = try mpd.map { address throws(PartyCastError) in try MPDLink(address: address, logger: logger) }
        let party = Party(sources: playable, library: try library.map(Library.init(folder:)) ?? Library(), options: options,
                          fanout: fanout, logger: logger, opener: { spec throws(PartyCastError) in try SourceRegistry.resolve(spec, options: sourceOptions) },
                          companion: mpdLink)
        mpdLink?.start { report in party.companionReported(report) }
        let group = MultiThreadedEventLoopGroup.singleton
        let server = try await BroadcastServer(host: bind, port: port, fanout: fanout, key: partyKey, welcome: party.welcome,
                                               group: group, logger: logger)
        // The remote control drives the party's command queue, as the keys below do.
        let remote = try await remoteControl(party: party, streamPort: server.port, key: partyKey, refusals: fanout.refusals, logger: logger)
        let sendspinServer = try await sendspinServer(party: party, fanout: fanout, name: options.name, private: partyKey != nil, group: group, logger: logger)
        let dialledPlayers = try dialledPlayers()
        guard dialledPlayers.isEmpty || sendspinServer != nil else {
            throw PartyCastError(.invalidArgument, "--sendspin-player: Sendspin is off at this party (see above)")
        }
        var publisher: ServicePublisher?
        let txt = ["proto": "\(partyCastProtocolVersion)", "codec": codec, "id": String(party.sessionID, radix: 16)]
            .merging(partyKey == nil ? [:] : ["key": "required"]) { $1 }
            .merging(["control": "\(remote.port)"]) { $1 }
        if !noMDNS {
            do throws(PartyCastError) {
                publisher = try ServicePublisher(name: options.name, port: server.port, txt: txt.merging(["listeners": "0"]) { $1 }) { event in
                    logger.info("mDNS: \(event)")
                }
            } catch {
                logger.warning("not advertising over mDNS (\(error.message)); listeners can still join with --host \(host):\(server.port)")
            }
        }
        var sendspinPublisher: ServicePublisher?
        if let sendspinServer {
            logger.info("Sendspin players join at ws://\(host):\(sendspinServer.port)\(SendspinServer.path)")
            if publisher != nil {
                do throws(PartyCastError) {
                    sendspinPublisher = try ServicePublisher(name: options.name, type: PartyCastService.sendspinServerType, port: sendspinServer.port,
                                                             txt: ["path": SendspinServer.path, "name": options.name]) { event in
                        // The party's own publisher already says when avahi-daemon is away: one warning, not two.
                        if case .daemonUnavailable = event { return }
                        logger.info("mDNS (Sendspin): \(event)")
                    }
                } catch {
                    logger.warning("not advertising Sendspin over mDNS (\(error.message)); players can still dial ws://\(host):\(sendspinServer.port)\(SendspinServer.path)")
                }
            }
        }
        let sendspinAdvertised = sendspinPublisher
        let access = partyKey == nil ? "" : ", private: listeners need the key"
        let addresses: [String]
        do {
            addresses = try RemoteURLs.lanAddresses()
        } catch {
            logger.notice("cannot list this machine's addresses (\(error)): the remote's URL names it by its mDNS name alone")
            addresses = []
        }
        let urls = RemoteURLs.urls(port: remote.port, bind: bind, hostName: host, addresses: addresses)
        // For a phone to scan; not in a journal, where it would be 17 lines of blocks.
        var drawing: [String] = []
        if Console.isTerminal, let first = urls.first {
            do throws(PartyCastError) {
                drawing = try QRCode.lines(encoding: first)
            } catch {
                logger.notice("\(error.message)")
            }
        }
        let announcement = Announcement(lines: [
            "broadcasting \"\(options.name)\" on \(host):\(server.port) (\(options.codec.summary(bitrateKbps: bitrate))\(access))",
            "remote control: \(urls.joined(separator: " or ")) (or `broadcaster ctl`)",
        ], drawing: drawing, logger: logger)
        let advertised = publisher
        if let publisher {
            // The listener count in the TXT record follows joins and leaves as they happen.
            let count = LockedValueBox(0)
            fanout.observe {
                let listeners = fanout.peers.count
                guard count.withLockedValue({ counted in defer { counted = listeners }; return counted != listeners }) else { return }
                publisher.update(txt: txt.merging(["listeners": "\(listeners)"]) { $1 })
            }
        }
        // Keys at the broadcaster's own terminal: space pauses and resumes, ←/→ seek 10 s, q quits.
        let keys = KeyReader { key in
            let now = party.snapshot
            let command: PartyCommand
            switch key {
            case .quit: return party.stop()
            case .space: command = now.paused ? .resume : .pause
            case .left: command = .seek(seconds: max(0, now.elapsedSeconds - 10))
            case .right: command = .seek(seconds: now.elapsedSeconds + 10)
            }
            Task {
                if case .failure(let refusal) = await party.perform(command) { logger.notice("\(refusal.message)") }
            }
        }
        // Shut down in the reverse of this order: the pacer (and its goodbyes) first, the servers last.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: server), .init(service: remote)]
        if let sendspinServer {
            services.append(.init(service: sendspinServer))
            if !dialledPlayers.isEmpty { services.append(.init(service: sendspinServer.dialler(for: dialledPlayers))) }
        }
        services.append(.init(service: HeldUntilShutdown { advertised?.stop(); sendspinAdvertised?.stop() }))
        services.append(.init(service: HeldUntilShutdown { keys?.finish() }))
        if let mpdLink { services.append(.init(service: HeldUntilShutdown { mpdLink.stop() })) }
        if Console.isTerminal {
            services.append(.init(service: StatusDisplay(name: options.name, endpoint: "\(host):\(server.port)", party: party, fanout: fanout)))
        }
        services.append(.init(service: announcement, successTerminationBehavior: .ignore))
        services.append(.init(service: PacerService(party: party, fanout: fanout, logger: logger), successTerminationBehavior: .gracefullyShutdownGroup))
        let serviceGroup = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigint, .sigterm], logger: logger))
        try await serviceGroup.run()
    }

    /// The remote control on `--control-port`, else on the stream port + 1, else (that one taken by
    /// some other program) on a free port: an unasked-for port is no reason to refuse to play.
    private func remoteControl(party: Party, streamPort: Int, key: PartyKey?, refusals: Refusals, logger: Logger) async throws(PartyCastError) -> ControlServer {
        let preferred = controlPort ?? (port == 0 ? 0 : streamPort + 1)
        do throws(PartyCastError) {
            return try await ControlServer(control: party, host: bind, port: preferred, key: key, refusals: refusals, logger: logger)
        } catch where controlPort == nil && preferred != 0 {
            logger.notice("the remote control's usual port \(preferred) cannot be used (\(error.message)); it takes a free one")
            return try await ControlServer(control: party, host: bind, port: 0, key: key, refusals: refusals, logger: logger)
        }
    }

    /// The Sendspin server role, unless turned off: at a private party only when asked for
    /// (its players cannot prove the key), and only when the party has PCM to give it.
    private func sendspinServer(party: Party, fanout: Fanout, name: String, private isPrivate: Bool, group: any EventLoopGroup,
                                logger: Logger) async throws(PartyCastError) -> SendspinServer? {
        if noSendspin { return nil }
        if isPrivate && !sendspin {
            logger.info("Sendspin is off at a private party: its players cannot prove the key (--sendspin serves them anyway)")
            return nil
        }
        if WireCodecs.named(codec)?.passesThrough == true {
            logger.notice("Sendspin is off with --codec \(codec): its players need the party's PCM, which --codec opus or pcm makes")
            return nil
        }
        if isPrivate { logger.warning("Sendspin is on at a private party: Sendspin players join WITHOUT the party key") }
        let preferred = sendspinPort ?? 8927
        do throws(PartyCastError) {
            return try await SendspinServer(party: party, fanout: fanout, name: name, host: bind, port: preferred, group: group, logger: logger)
        } catch where sendspinPort == nil {
            logger.notice("Sendspin's usual port \(preferred) cannot be used (\(error.message)); it takes a free one")
            return try await SendspinServer(party: party, fanout: fanout, name: name, host: bind, port: 0, group: group, logger: logger)
        }
    }

    /// A source per argument (per audio file in a folder); one that can't be read is skipped with a line, so the rest plays.
    private func playableSources(options: SourceOptions, logger: Logger) throws(PartyCastError) -> [ResolvedSource] {
        var playable: [ResolvedSource] = []
        var lastFailure: PartyCastError?
        func skip(_ spec: String, _ error: PartyCastError) {
            logger.warning("skipping \(spec): \(error.message)")
            lastFailure = error
        }
        var specs: [String] = []
        for argument in sources {
            do throws(PartyCastError) { specs += try Self.expandingFolder(argument) } catch { skip(argument, error) }
        }
        for spec in specs {
            do throws(PartyCastError) { playable.append(try SourceRegistry.resolve(spec, options: options)) } catch { skip(spec, error) }
        }
        if playable.isEmpty, let lastFailure { throw lastFailure }
        return playable
    }

    private func sourceOptions(logger: Logger) throws(PartyCastError) -> SourceOptions {
        var options = SourceOptions()
        options.onEvent = { logger.notice("\($0)") }
        if let pcmFormat { options.rawPCM = try RawPCMFormat(parsing: pcmFormat) }
        // mpd's fifo output writes raw PCM, which sniffing could take for something else.
        options.pipesAreRaw = pcmFormat != nil || mpd != nil
        // mpd restarted is mpd back, not the end of the party.
        options.pipesOutliveWriters = mpd != nil
        // mpd stopped has no song to name: the pipe is called after it rather than by its path.
        options.pipeTitle = title ?? mpd.map { "mpd at \($0)" }
        return options
    }

    /// A folder stands for the audio files under it, in name order (a library for a service to play);
    /// any other spec for itself.
    static func expandingFolder(_ spec: String) throws(PartyCastError) -> [String] {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: spec, isDirectory: &isFolder), isFolder.boolValue else { return [spec] }
        let files = try Library.audioFiles(under: spec)
        guard !files.isEmpty else { throw PartyCastError(.fileNotFound, "\(spec): a folder with no audio files in it") }
        return files
    }
}
