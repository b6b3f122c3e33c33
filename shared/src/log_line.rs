//! The variables of an access-log line of the operator's own (ingress-nginx's
//! `log-format-upstream`): which nginx variables ramjet writes, and a line read into text and
//! variables. Read here so that the daemon (which writes the lines, `ramjet_dataplane`) and the
//! migration report (which says what a ConfigMap's line will look like) agree.

/// A line: text and variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinePart {
    Text(Vec<u8>),
    Request(RequestVar),
    Response(ResponseVar),
    /// A variable ramjet does not have: written as nginx writes an empty one.
    Missing,
}

/// Variables known when the request's head has been read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestVar {
    RemoteAddr,
    RemotePort,
    RemoteUser,
    TimeLocal,
    TimeIso8601,
    Msec,
    Request,
    Method,
    RequestUri,
    Uri,
    Args,
    Protocol,
    Host,
    Scheme,
    RequestId,
    /// `$opentelemetry_trace_id`: the request's trace, when it has one.
    TraceId,
    /// `$http_<name>` (`_` read as `-`), `$http_referer` and `$http_user_agent` included.
    Field(String),
}

/// Variables known when the answer is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseVar {
    Status,
    BodyBytesSent,
    BytesSent,
    RequestLength,
    RequestTime,
    UpstreamName,
    UpstreamAddr,
    UpstreamStatus,
    UpstreamResponseTime,
    UpstreamConnectTime,
    UpstreamHeaderTime,
    UpstreamResponseLength,
}

/// Reads a line (`$name` and `${name}` are variables, a `$` before anything else is text);
/// returns its parts and the variables it names that ramjet does not have.
pub fn parse(line: &str) -> (Vec<LinePart>, Vec<String>) {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    let mut text = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            text.push(bytes[i]);
            i += 1;
            continue;
        }
        let (name, next) = match bytes.get(i + 1) {
            Some(b'{') => match line[i + 2..].find('}') {
                Some(end) => (&line[i + 2..i + 2 + end], i + 3 + end),
                None => ("", bytes.len()),
            },
            _ => {
                let len = bytes[i + 1..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
                (&line[i + 1..i + 1 + len], i + 1 + len)
            }
        };
        if name.is_empty() {
            text.push(b'$');
            i += 1;
            continue;
        }
        if !text.is_empty() {
            parts.push(LinePart::Text(std::mem::take(&mut text)));
        }
        let part = variable(name);
        if part == LinePart::Missing && !missing.iter().any(|m| m == name) {
            missing.push(name.to_string());
        }
        parts.push(part);
        i = next;
    }
    if !text.is_empty() {
        parts.push(LinePart::Text(text));
    }
    (parts, missing)
}

fn variable(name: &str) -> LinePart {
    use RequestVar as Q;
    use ResponseVar as R;
    let request = LinePart::Request;
    let response = LinePart::Response;
    match name {
        "remote_addr" | "realip_remote_addr" | "binary_remote_addr" => request(Q::RemoteAddr),
        "remote_port" | "realip_remote_port" => request(Q::RemotePort),
        "remote_user" => request(Q::RemoteUser),
        "time_local" => request(Q::TimeLocal),
        "time_iso8601" => request(Q::TimeIso8601),
        "msec" => request(Q::Msec),
        "request" => request(Q::Request),
        "request_method" => request(Q::Method),
        "request_uri" => request(Q::RequestUri),
        "uri" | "document_uri" => request(Q::Uri),
        "args" | "query_string" => request(Q::Args),
        "server_protocol" => request(Q::Protocol),
        "host" | "server_name" => request(Q::Host),
        "scheme" => request(Q::Scheme),
        "req_id" | "request_id" => request(Q::RequestId),
        "opentelemetry_trace_id" => request(Q::TraceId),
        "status" => response(R::Status),
        "body_bytes_sent" => response(R::BodyBytesSent),
        "bytes_sent" => response(R::BytesSent),
        "request_length" => response(R::RequestLength),
        "request_time" => response(R::RequestTime),
        "proxy_upstream_name" => response(R::UpstreamName),
        "upstream_addr" => response(R::UpstreamAddr),
        "upstream_status" => response(R::UpstreamStatus),
        "upstream_response_time" => response(R::UpstreamResponseTime),
        "upstream_connect_time" => response(R::UpstreamConnectTime),
        "upstream_header_time" => response(R::UpstreamHeaderTime),
        "upstream_response_length" | "upstream_bytes_received" => response(R::UpstreamResponseLength),
        _ => match name.strip_prefix("http_") {
            Some(field) if !field.is_empty() => request(Q::Field(field.replace('_', "-"))),
            _ => LinePart::Missing,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_variables_are_named_and_written_empty() {
        let (parts, missing) = parse("$remote_addr $geoip_country ${status} $$ $http_x_a");
        assert_eq!(missing, ["geoip_country"]);
        assert_eq!(parts[4], LinePart::Response(ResponseVar::Status));
        assert_eq!(parts.last(), Some(&LinePart::Request(RequestVar::Field("x-a".into()))));
        assert_eq!(parts[5], LinePart::Text(b" $$ ".to_vec()), "a `$` before no name is text");
    }
}
