/**
 * Pure validators for names, label keys/values, annotations and config keys, ported from
 * Kubernetes' apimachinery `validation` package so the messages match kube-apiserver word for
 * word. The `is*` functions return detail strings (empty when valid); the `validate*`
 * functions return `FieldError`s at a given path, ready for an `Invalid` Status.
 */
import * as FieldError from "./FieldError.js"

const regexError = (msg: string, fmt: string, ...examples: ReadonlyArray<string>): string => {
  if (examples.length === 0) return `${msg} (regex used for validation is '${fmt}')`
  // Kubernetes joins examples as "'a',  or 'b', " (the double space is theirs, kept for parity).
  const eg = examples.map((e, i) => `${i > 0 ? " or " : ""}'${e}', `).join("")
  return `${msg} (e.g. ${eg}regex used for validation is '${fmt}')`
}

const maxLenError = (n: number): string => `must be no more than ${n} characters`

const dns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
const dns1123LabelRe = new RegExp(`^${dns1123LabelFmt}$`)
const dns1123SubdomainFmt = `${dns1123LabelFmt}(\\.${dns1123LabelFmt})*`
const dns1123SubdomainRe = new RegExp(`^${dns1123SubdomainFmt}$`)
const dns1035LabelFmt = "[a-z]([-a-z0-9]*[a-z0-9])?"
const dns1035LabelRe = new RegExp(`^${dns1035LabelFmt}$`)
const qualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
const qualifiedNameRe = new RegExp(`^${qualifiedNameFmt}$`)
const labelValueFmt = `(${qualifiedNameFmt})?`
const labelValueRe = new RegExp(`^${labelValueFmt}$`)
const configKeyFmt = "[-._a-zA-Z0-9]+"
const configKeyRe = new RegExp(`^${configKeyFmt}$`)
const qualifiedNameErrMsg =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"

/** Maximum length of a DNS-1123 subdomain (most object names). */
export const DNS1123SubdomainMaxLength = 253
/** Maximum length of a DNS-1123 or DNS-1035 label (namespace and service names). */
export const DNS1123LabelMaxLength = 63
/** Maximum length of a label value and of the name part of a qualified name. */
export const LabelValueMaxLength = 63
/** Kubernetes' limit on the total size of an object's annotations. */
export const TotalAnnotationSizeLimitB = 256 * 1024

/** Details of why `value` is not a DNS-1123 subdomain (object names, key prefixes). */
export const isDNS1123Subdomain = (value: string): ReadonlyArray<string> => {
  const errs: Array<string> = []
  if (value.length > DNS1123SubdomainMaxLength) errs.push(maxLenError(DNS1123SubdomainMaxLength))
  if (!dns1123SubdomainRe.test(value)) {
    errs.push(
      regexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        dns1123SubdomainFmt,
        "example.com"
      )
    )
  }
  return errs
}

/** Details of why `value` is not a DNS-1123 label (namespace names, container names). */
export const isDNS1123Label = (value: string): ReadonlyArray<string> => {
  const errs: Array<string> = []
  if (value.length > DNS1123LabelMaxLength) errs.push(maxLenError(DNS1123LabelMaxLength))
  if (!dns1123LabelRe.test(value)) {
    errs.push(
      regexError(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        dns1123LabelFmt,
        "my-name",
        "123-abc"
      )
    )
  }
  return errs
}

/** Details of why `value` is not a DNS-1035 label (service names: must start with a letter). */
export const isDNS1035Label = (value: string): ReadonlyArray<string> => {
  const errs: Array<string> = []
  if (value.length > DNS1123LabelMaxLength) errs.push(maxLenError(DNS1123LabelMaxLength))
  if (!dns1035LabelRe.test(value)) {
    errs.push(
      regexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
        dns1035LabelFmt,
        "my-name",
        "abc-123"
      )
    )
  }
  return errs
}

/** Details of why `value` is not a qualified name (`[prefix/]name`): label and annotation keys. */
export const isQualifiedName = (value: string): ReadonlyArray<string> => {
  const errs: Array<string> = []
  const parts = value.split("/")
  let name: string
  if (parts.length === 1) {
    name = parts[0] ?? ""
  } else if (parts.length === 2) {
    const prefix = parts[0] ?? ""
    name = parts[1] ?? ""
    if (prefix.length === 0) errs.push("prefix part must be non-empty")
    else for (const msg of isDNS1123Subdomain(prefix)) errs.push(`prefix part ${msg}`)
  } else {
    return [
      `a qualified name ${regexError(qualifiedNameErrMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc")} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`
    ]
  }
  if (name.length === 0) errs.push("name part must be non-empty")
  else if (name.length > LabelValueMaxLength) errs.push(`name part ${maxLenError(LabelValueMaxLength)}`)
  if (!qualifiedNameRe.test(name)) {
    errs.push(`name part ${regexError(qualifiedNameErrMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc")}`)
  }
  return errs
}

/** Details of why `value` is not a valid label value (may be empty). */
export const isValidLabelValue = (value: string): ReadonlyArray<string> => {
  const errs: Array<string> = []
  if (value.length > LabelValueMaxLength) errs.push(maxLenError(LabelValueMaxLength))
  if (!labelValueRe.test(value)) {
    errs.push(
      regexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        labelValueFmt,
        "MyValue",
        "my_value",
        "12345"
      )
    )
  }
  return errs
}

/** Details of why `value` is not a valid ConfigMap/Secret data key. */
export const isConfigMapKey = (value: string): ReadonlyArray<string> => {
  const errs: Array<string> = []
  if (value.length > DNS1123SubdomainMaxLength) errs.push(maxLenError(DNS1123SubdomainMaxLength))
  if (!configKeyRe.test(value)) {
    errs.push(
      regexError(
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
        configKeyFmt,
        "key.name",
        "KEY_NAME",
        "key-name"
      )
    )
  }
  // Keys become file names when mounted; these would escape or alias the directory.
  if (value === ".") errs.push("must not be '.'")
  else if (value === "..") errs.push("must not be '..'")
  else if (value.startsWith("..")) errs.push("must not start with '..'")
  return errs
}

const invalidEach = (path: string, value: unknown, details: ReadonlyArray<string>): ReadonlyArray<FieldError.FieldError> =>
  details.map((d) => FieldError.invalid(path, value, d))

/** Errors for an object name that must be a DNS-1123 subdomain (the default for most kinds). */
export const validateName = (name: string, path = "metadata.name"): ReadonlyArray<FieldError.FieldError> =>
  invalidEach(path, name, isDNS1123Subdomain(name))

/** Errors for a namespace name (a DNS-1123 label), e.g. `metadata.namespace`. */
export const validateNamespaceName = (name: string, path = "metadata.namespace"): ReadonlyArray<FieldError.FieldError> =>
  invalidEach(path, name, isDNS1123Label(name))

/** Errors for a label map: every key a qualified name, every value a label value; all at `path`. */
export const validateLabels = (
  labels: Readonly<Record<string, string>>,
  path = "metadata.labels"
): ReadonlyArray<FieldError.FieldError> => {
  const errs: Array<FieldError.FieldError> = []
  for (const [key, value] of Object.entries(labels)) {
    errs.push(...invalidEach(path, key, isQualifiedName(key)))
    errs.push(...invalidEach(path, value, isValidLabelValue(value)))
  }
  return errs
}

/** Errors for an annotation map: keys are qualified names (case-insensitively), total size ≤ 256 KiB. */
export const validateAnnotations = (
  annotations: Readonly<Record<string, string>>,
  path = "metadata.annotations"
): ReadonlyArray<FieldError.FieldError> => {
  const errs: Array<FieldError.FieldError> = []
  let size = 0
  for (const [key, value] of Object.entries(annotations)) {
    // Kubernetes lower-cases annotation keys before checking them: upper case is allowed.
    errs.push(...invalidEach(path, key, isQualifiedName(key.toLowerCase())))
    size += utf8Length(key) + utf8Length(value)
  }
  if (size > TotalAnnotationSizeLimitB) errs.push(FieldError.tooLong(path, TotalAnnotationSizeLimitB))
  return errs
}

/** Errors for the keys of a ConfigMap/Secret data map, each reported at `path[key]`. */
export const validateConfigMapKeys = (
  data: Readonly<Record<string, unknown>>,
  path = "data"
): ReadonlyArray<FieldError.FieldError> =>
  Object.keys(data).flatMap((key) => invalidEach(`${path}[${key}]`, key, isConfigMapKey(key)))

const encoder = new TextEncoder()
const utf8Length = (s: string): number => {
  // Fast path: pure ASCII strings are one byte per UTF-16 unit.
  // eslint-disable-next-line no-control-regex
  return /^[\x00-\x7f]*$/.test(s) ? s.length : encoder.encode(s).length
}
