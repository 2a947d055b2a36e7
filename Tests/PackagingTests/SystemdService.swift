import Foundation

/// The command line a packaged systemd unit runs, worked out as systemd does it: the unit's
/// `Environment=`, then the environment file over it, then `ExecStart=` with `$VAR` split at
/// whitespace (zero or more words) and `${VAR}` as they stand inside one word.
struct SystemdService {
    let environment: [String: String]
    let execStart: [String]

    /// `unit`'s text, with `environmentFile`'s over its defaults; `%H` is this machine's host name.
    init(unit: String, environmentFile: String) {
        var environment: [String: String] = [:]
        var execStart: [String] = []
        for line in unit.split(separator: "\n").map(String.init) {
            if line.hasPrefix("Environment=") {
                for assignment in Self.words(String(line.dropFirst("Environment=".count))) {
                    Self.assign(assignment.replacingOccurrences(of: "%H", with: ProcessInfo.processInfo.hostName), to: &environment)
                }
            } else if line.hasPrefix("ExecStart=") {
                execStart = Self.words(String(line.dropFirst("ExecStart=".count)))
            }
        }
        for line in environmentFile.split(separator: "\n").map(String.init) where !line.hasPrefix("#") && line.contains("=") {
            Self.assign(line, to: &environment)
        }
        self.environment = environment
        self.execStart = execStart
    }

    /// The program and its arguments, with `overrides` (CREDENTIALS_DIRECTORY …) in the environment.
    func commandLine(_ overrides: [String: String]) -> [String] {
        let variables = environment.merging(overrides) { $1 }
        return execStart.flatMap { word -> [String] in
            if word.hasPrefix("$"), !word.hasPrefix("${") {
                return (variables[String(word.dropFirst())] ?? "").split(whereSeparator: \.isWhitespace).map(String.init)
            }
            var expanded = word
            for (name, value) in variables { expanded = expanded.replacingOccurrences(of: "${\(name)}", with: value) }
            return [expanded]
        }
    }

    /// NAME=VALUE, the value's surrounding double quotes removed.
    private static func assign(_ assignment: String, to environment: inout [String: String]) {
        guard let equals = assignment.firstIndex(of: "=") else { return }
        var value = String(assignment[assignment.index(after: equals)...])
        if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
        environment[String(assignment[..<equals])] = value
    }

    /// Words split at spaces, a double-quoted stretch (quotes dropped) kept as one.
    private static func words(_ text: String) -> [String] {
        var words: [String] = [], current = "", quoted = false, started = false
        for character in text {
            switch character {
            case "\"": quoted.toggle(); started = true
            case " " where !quoted:
                if started { words.append(current) }
                current = ""
                started = false
            default: current.append(character); started = true
            }
        }
        if started { words.append(current) }
        return words
    }
}
