import ArgumentParser
import Logging

/// swift-log's output for the command-line programs: "listener: message", with the level named when
/// it is not plain information, through the `Console`.
public struct ConsoleLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String

    public init(label: String, level: Logger.Level) {
        self.label = label
        logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level == .info || event.level == .notice ? "" : "\(event.level): "
        Console.line("\(label): \(level)\(event.message)")
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// `--log-level`, the same in every program.
public struct LoggingOptions: ParsableArguments {
    @Option(name: .customLong("log-level"), help: "How much to log.")
    public var level: Logger.Level = .info

    public init() {}

    /// Sends every Logger of the process through the console; returns the program's own.
    public func bootstrap(program: String) -> Logger {
        let level = self.level
        LoggingSystem.bootstrap { ConsoleLogHandler(label: $0, level: level) }
        return Logger(label: program)
    }
}
