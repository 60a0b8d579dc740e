/**
 * The command-line flags of the security components, declared in one place so `koder-fleet
 * server` parses them strictly and passes them to the components as `Context.flags`.
 */

/** `node:util` parseArgs options of the security flags. */
export const options = {
  "authorization-mode": { type: "string" },
  "service-account-key-file": { type: "string" },
  "service-account-issuer": { type: "string" },
  "oidc-issuer-url": { type: "string" },
  "oidc-client-id": { type: "string" },
  "oidc-username-claim": { type: "string" },
  "oidc-username-prefix": { type: "string" },
  "oidc-groups-claim": { type: "string" },
  "oidc-groups-prefix": { type: "string" },
  "oidc-ca-file": { type: "string" },
  "encryption-key-file": { type: "string" },
  "kms-url": { type: "string" },
  "audit-log": { type: "string" },
  "audit-log-max-bytes": { type: "string" },
  "audit-log-max-backups": { type: "string" },
  "service-cluster-ip-range": { type: "string" },
  "service-node-port-range": { type: "string" },
  "pod-security-default": { type: "string" },
  "pod-security-exempt-namespaces": { type: "string" },
  "pod-security-exempt-usernames": { type: "string" },
  "pod-security-exempt-runtime-classes": { type: "string" }
} as const

/** The usage lines of the security flags. */
export const usage = `
  --authorization-mode MODE    RBAC (default) or AlwaysAllow
  --service-account-key-file F signing key of ServiceAccount tokens (default DIR/service-account.key, generated)
  --service-account-issuer URL iss of ServiceAccount tokens (default https://kubernetes.default.svc)
  --oidc-issuer-url URL        accept OIDC ID tokens from this issuer (keys from its JWKS)
  --oidc-client-id ID          the audience OIDC tokens must carry
  --oidc-username-claim NAME   claim holding the user name (default sub)
  --oidc-username-prefix P     prefix added to OIDC user names (default "<issuer>#" unless the claim is email)
  --oidc-groups-claim NAME     claim holding the groups (default groups)
  --oidc-groups-prefix P       prefix added to OIDC groups
  --oidc-ca-file FILE          CA bundle to verify the issuer with
  --encryption-key-file FILE   AES-256-GCM keys for Secrets at rest, one per line "name:base64"; the first encrypts
  --kms-url URL                unwrap the data key from this KMS endpoint at boot (fail-closed)
  --audit-log FILE             audit log of mutating requests (default DIR/audit.log)
  --audit-log-max-bytes N      rotate the audit log at this size (default 100 MiB)
  --audit-log-max-backups N    rotated audit logs kept (default 5)
  --service-cluster-ip-range R Service cluster IPs: a CIDR or a dual-stack pair (default 10.96.0.0/12)
  --pod-security-default L     Pod Security level of namespaces without pod-security.kubernetes.io labels:
                               privileged, baseline (default) or restricted (customer namespaces: restricted)
  --pod-security-exempt-namespaces N,…     namespaces Pod Security admission never checks
  --pod-security-exempt-usernames U,…      users whose pods Pod Security admission never checks
  --pod-security-exempt-runtime-classes R,… runtime classes Pod Security admission never checks`
