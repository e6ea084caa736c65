// Decodes the gRPC rich error model: the google.rpc.Status in the grpc-status-details-bin trailer.
import protobuf from 'protobufjs';

/** Trailer holding the serialized google.rpc.Status of a failed call. */
export const STATUS_DETAILS_KEY = 'grpc-status-details-bin';

// NOTE(node): only the messages and fields hookmesh sends, copied from the public
// google/rpc/status.proto and error_details.proto (same names, same field numbers), so no
// googleapis download is needed. Fields left out are skipped by the decoder, as unknown
// fields always are.
const GOOGLE_RPC_PROTO = `
syntax = "proto3";
package google.rpc;
import "google/protobuf/any.proto";

message Status {
  int32 code = 1;
  string message = 2;
  repeated google.protobuf.Any details = 3;
}

message ErrorInfo {
  string reason = 1;
  string domain = 2;
  map<string, string> metadata = 3;
}

message BadRequest {
  message FieldViolation {
    string field = 1;
    string description = 2;
  }
  repeated FieldViolation field_violations = 1;
}
`;

const TO_OBJECT = { defaults: true, arrays: true, objects: true };

let types;

function loadTypes() {
  if (types === undefined) {
    const root = new protobuf.Root();
    // protobufjs bundles google.protobuf.Any; parse() does not follow imports by itself.
    root.addJSON(protobuf.common.get('google/protobuf/any.proto').nested);
    protobuf.parse(GOOGLE_RPC_PROTO, root, { keepCase: true });
    root.resolveAll();
    types = {
      Status: root.lookupType('google.rpc.Status'),
      ErrorInfo: root.lookupType('google.rpc.ErrorInfo'),
      BadRequest: root.lookupType('google.rpc.BadRequest'),
    };
  }
  return types;
}

/** The message name in an Any's type URL (`type.googleapis.com/google.rpc.ErrorInfo`). */
function typeName(typeUrl) {
  return typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
}

/**
 * What the rich error details of a failed call say.
 *
 * @param {import('@grpc/grpc-js').Metadata | undefined} metadata The call's trailers.
 * @returns {{reason: string, domain: string, metadata: Record<string, string>,
 *   violations: {field: string, description: string}[]}} The first ErrorInfo's reason,
 *   domain and metadata (empty when there is none) and every BadRequest field violation.
 *   A missing or undecodable trailer reads as no details.
 */
export function statusDetails(metadata) {
  const out = { reason: '', domain: '', metadata: {}, violations: [] };
  const [raw] = metadata?.get(STATUS_DETAILS_KEY) ?? [];
  if (!Buffer.isBuffer(raw)) return out;
  const { Status, ErrorInfo, BadRequest } = loadTypes();
  let seenInfo = false;
  try {
    for (const detail of Status.decode(raw).details) {
      const name = typeName(detail.type_url);
      if (name === 'google.rpc.ErrorInfo' && !seenInfo) {
        const info = ErrorInfo.toObject(ErrorInfo.decode(detail.value), TO_OBJECT);
        Object.assign(out, { reason: info.reason, domain: info.domain, metadata: info.metadata });
        seenInfo = true;
      } else if (name === 'google.rpc.BadRequest') {
        const bad = BadRequest.toObject(BadRequest.decode(detail.value), TO_OBJECT);
        for (const v of bad.field_violations) {
          out.violations.push({ field: v.field, description: v.description });
        }
      }
    }
  } catch {
    // NOTE(node): a malformed trailer must not hide the status code and message the
    // caller already has; keep whatever decoded before the failure.
  }
  return out;
}
