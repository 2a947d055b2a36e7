extension String {
    /// Text a peer sent (titles, names, reasons), made safe to print: control characters (terminal
    /// escapes, carriage returns, bidi overrides) become spaces, runs of white space collapse, and the
    /// result is cut to `limit` characters with an ellipsis, so a hostile peer can neither redraw the
    /// terminal nor flood it.
    public init(untrusted text: some StringProtocol, limit: Int = 200) {
        var result = ""
        var count = 0
        var pendingSpace = false
        for scalar in text.unicodeScalars {
            let isControl = scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
            if isControl || scalar.properties.isWhitespace {
                pendingSpace = !result.isEmpty
                continue
            }
            if count >= limit {
                result.append("…")
                break
            }
            if pendingSpace {
                result.append(" ")
                count += 1
                pendingSpace = false
            }
            result.unicodeScalars.append(scalar)
            count += 1
        }
        self = result
    }
}
