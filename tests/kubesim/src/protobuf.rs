//! Request bodies in `application/vnd.kubernetes.protobuf`, turned into the JSON the rest of
//! the server works on.
//!
//! kubectl's typed client (`kubectl create deployment|job|cronjob|service|ingress|secret|...`,
//! `kubectl certificate approve`) sends protobuf whatever discovery says, and does not retry in
//! JSON after a 415. The body is the `k8s\0` magic followed by a `runtime.Unknown` envelope:
//! field 1 the type meta (apiVersion 1, kind 2), field 2 the object's own encoding. Decoding an
//! object needs its schema: the tables below describe the kinds kubectl's imperative commands
//! write, with the fields those commands (and ordinary manifests) fill in, numbered as in
//! k8s.io/api's `generated.proto`. Fields not described are skipped; any other kind is answered
//! 415. A generated decoder for every type (the `k8s-pb` crate) would still need a hand-written
//! conversion to JSON per type, so the tables stay the smaller thing to keep right.

use base64::Engine;
use serde_json::{Map, Value, json};

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// How one field of a message is encoded and shown in JSON.
///
/// Go's protobuf code writes non-pointer scalars even when they hold the zero value, and
/// pointer fields only when set; the kinds say which zero values JSON (`omitempty`) leaves out.
#[derive(Clone, Copy)]
enum Kind {
    /// A string; empty means unset (Go's `omitempty`).
    Str,
    /// A varint integer whose zero means unset (a non-pointer `omitempty` field).
    Int,
    /// A varint integer shown even when zero (a pointer, or a field without `omitempty`).
    Num,
    /// A boolean pointer: sent only when set, shown even when false.
    Bool,
    /// A non-pointer `omitempty` boolean: always sent, shown only when true.
    Flag,
    /// A `metav1.Time` message (seconds 1, nanos 2), shown as RFC 3339.
    Time,
    /// A nested message.
    Msg(&'static [Field]),
    /// A nested message whose fields JSON shows in the parent (Go's `json:",inline"`).
    Inline(&'static [Field]),
    /// A repeated nested message.
    MsgList(&'static [Field]),
    /// A repeated string.
    StrList,
    /// A `map<string, string>`.
    StrMap,
    /// A `map<string, bytes>`, shown base64-encoded as in JSON.
    BytesMap,
    /// Bytes, shown base64-encoded as in JSON; empty means unset.
    Bytes,
    /// A `resource.Quantity` (its string 1), shown as that string.
    Quantity,
    /// A `map<string, resource.Quantity>`.
    QuantityMap,
    /// An `intstr.IntOrString` (type 1, intVal 2, strVal 3), shown as a number or a string.
    IntOrStr,
    /// A non-pointer `IntOrString` whose integer zero means unset (a Service's `targetPort`).
    IntOrStrOmitZero,
}

/// Field number, JSON name, encoding.
type Field = (u64, &'static str, Kind);

const TYPE_META: &[Field] = &[(1, "apiVersion", Kind::Str), (2, "kind", Kind::Str)];

const OWNER_REFERENCE: &[Field] = &[
    (1, "kind", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
    (6, "controller", Kind::Bool),
    (7, "blockOwnerDeletion", Kind::Bool),
];

const OBJECT_META: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "generateName", Kind::Str),
    (3, "namespace", Kind::Str),
    (5, "uid", Kind::Str),
    (6, "resourceVersion", Kind::Str),
    (7, "generation", Kind::Int),
    (8, "creationTimestamp", Kind::Time),
    (9, "deletionTimestamp", Kind::Time),
    (10, "deletionGracePeriodSeconds", Kind::Num),
    (11, "labels", Kind::StrMap),
    (12, "annotations", Kind::StrMap),
    (13, "ownerReferences", Kind::MsgList(OWNER_REFERENCE)),
    (14, "finalizers", Kind::StrList),
];

const OBJECT_REFERENCE: &[Field] = &[
    (1, "kind", Kind::Str),
    (2, "namespace", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
    (6, "resourceVersion", Kind::Str),
    (7, "fieldPath", Kind::Str),
];

const NAMESPACE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(&[(1, "finalizers", Kind::StrList)])),
];

const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::StrMap),
    (3, "binaryData", Kind::BytesMap),
    (4, "immutable", Kind::Bool),
];

const SECRET: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::BytesMap),
    (3, "type", Kind::Str),
    (4, "stringData", Kind::StrMap),
    (5, "immutable", Kind::Bool),
];

const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "secrets", Kind::MsgList(OBJECT_REFERENCE)),
    (
        3,
        "imagePullSecrets",
        Kind::MsgList(&[(1, "name", Kind::Str)]),
    ),
    (4, "automountServiceAccountToken", Kind::Bool),
];

const POLICY_RULE: &[Field] = &[
    (1, "verbs", Kind::StrList),
    (2, "apiGroups", Kind::StrList),
    (3, "resources", Kind::StrList),
    (4, "resourceNames", Kind::StrList),
    (5, "nonResourceURLs", Kind::StrList),
];

const ROLE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "rules", Kind::MsgList(POLICY_RULE)),
];

const CLUSTER_ROLE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "rules", Kind::MsgList(POLICY_RULE)),
    (
        3,
        "aggregationRule",
        Kind::Msg(&[(1, "clusterRoleSelectors", Kind::MsgList(LABEL_SELECTOR))]),
    ),
];

const ROLE_BINDING: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "subjects",
        Kind::MsgList(&[
            (1, "kind", Kind::Str),
            (2, "apiGroup", Kind::Str),
            (3, "name", Kind::Str),
            (4, "namespace", Kind::Str),
        ]),
    ),
    (
        3,
        "roleRef",
        Kind::Msg(&[
            (1, "apiGroup", Kind::Str),
            (2, "kind", Kind::Str),
            (3, "name", Kind::Str),
        ]),
    ),
];

// meta/v1 and core/v1 parts of workloads, numbered as in k8s.io/api's generated.proto.

const LABEL_SELECTOR: &[Field] = &[
    (1, "matchLabels", Kind::StrMap),
    (
        2,
        "matchExpressions",
        Kind::MsgList(&[
            (1, "key", Kind::Str),
            (2, "operator", Kind::Str),
            (3, "values", Kind::StrList),
        ]),
    ),
];

const LOCAL_OBJECT_REFERENCE: &[Field] = &[(1, "name", Kind::Str)];

const KEY_TO_PATH: &[Field] = &[
    (1, "key", Kind::Str),
    (2, "path", Kind::Str),
    (3, "mode", Kind::Num),
];

/// ConfigMapKeySelector and SecretKeySelector.
const KEY_SELECTOR: &[Field] = &[
    (1, "", Kind::Inline(LOCAL_OBJECT_REFERENCE)),
    (2, "key", Kind::Str),
    (3, "optional", Kind::Bool),
];

const ENV_VAR: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "value", Kind::Str),
    (
        3,
        "valueFrom",
        Kind::Msg(&[
            (
                1,
                "fieldRef",
                Kind::Msg(&[(1, "apiVersion", Kind::Str), (2, "fieldPath", Kind::Str)]),
            ),
            (
                2,
                "resourceFieldRef",
                Kind::Msg(&[
                    (1, "containerName", Kind::Str),
                    (2, "resource", Kind::Str),
                    (3, "divisor", Kind::Quantity),
                ]),
            ),
            (3, "configMapKeyRef", Kind::Msg(KEY_SELECTOR)),
            (4, "secretKeyRef", Kind::Msg(KEY_SELECTOR)),
        ]),
    ),
];

/// ConfigMapEnvSource and SecretEnvSource.
const ENV_SOURCE: &[Field] = &[
    (1, "", Kind::Inline(LOCAL_OBJECT_REFERENCE)),
    (2, "optional", Kind::Bool),
];

const ENV_FROM_SOURCE: &[Field] = &[
    (1, "prefix", Kind::Str),
    (2, "configMapRef", Kind::Msg(ENV_SOURCE)),
    (3, "secretRef", Kind::Msg(ENV_SOURCE)),
];

const CONTAINER_PORT: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "hostPort", Kind::Int),
    (3, "containerPort", Kind::Num),
    (4, "protocol", Kind::Str),
    (5, "hostIP", Kind::Str),
];

const RESOURCE_REQUIREMENTS: &[Field] = &[
    (1, "limits", Kind::QuantityMap),
    (2, "requests", Kind::QuantityMap),
    (
        3,
        "claims",
        Kind::MsgList(&[(1, "name", Kind::Str), (2, "request", Kind::Str)]),
    ),
];

const VOLUME_MOUNT: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "readOnly", Kind::Flag),
    (3, "mountPath", Kind::Str),
    (4, "subPath", Kind::Str),
    (5, "mountPropagation", Kind::Str),
    (6, "subPathExpr", Kind::Str),
    (7, "recursiveReadOnly", Kind::Str),
];

const EXEC_ACTION: &[Field] = &[(1, "command", Kind::StrList)];

const HTTP_GET_ACTION: &[Field] = &[
    (1, "path", Kind::Str),
    (2, "port", Kind::IntOrStr),
    (3, "host", Kind::Str),
    (4, "scheme", Kind::Str),
    (
        5,
        "httpHeaders",
        Kind::MsgList(&[(1, "name", Kind::Str), (2, "value", Kind::Str)]),
    ),
];

const TCP_SOCKET_ACTION: &[Field] = &[(1, "port", Kind::IntOrStr), (2, "host", Kind::Str)];

const PROBE: &[Field] = &[
    (
        1,
        "",
        Kind::Inline(&[
            (1, "exec", Kind::Msg(EXEC_ACTION)),
            (2, "httpGet", Kind::Msg(HTTP_GET_ACTION)),
            (3, "tcpSocket", Kind::Msg(TCP_SOCKET_ACTION)),
            (
                4,
                "grpc",
                Kind::Msg(&[(1, "port", Kind::Num), (2, "service", Kind::Str)]),
            ),
        ]),
    ),
    (2, "initialDelaySeconds", Kind::Int),
    (3, "timeoutSeconds", Kind::Int),
    (4, "periodSeconds", Kind::Int),
    (5, "successThreshold", Kind::Int),
    (6, "failureThreshold", Kind::Int),
    (7, "terminationGracePeriodSeconds", Kind::Num),
];

const LIFECYCLE_HANDLER: &[Field] = &[
    (1, "exec", Kind::Msg(EXEC_ACTION)),
    (2, "httpGet", Kind::Msg(HTTP_GET_ACTION)),
    (3, "tcpSocket", Kind::Msg(TCP_SOCKET_ACTION)),
    (4, "sleep", Kind::Msg(&[(1, "seconds", Kind::Num)])),
];

const SECURITY_CONTEXT: &[Field] = &[
    (
        1,
        "capabilities",
        Kind::Msg(&[(1, "add", Kind::StrList), (2, "drop", Kind::StrList)]),
    ),
    (2, "privileged", Kind::Bool),
    (4, "runAsUser", Kind::Num),
    (5, "runAsNonRoot", Kind::Bool),
    (6, "readOnlyRootFilesystem", Kind::Bool),
    (7, "allowPrivilegeEscalation", Kind::Bool),
    (8, "runAsGroup", Kind::Num),
    (9, "procMount", Kind::Str),
];

const CONTAINER: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "image", Kind::Str),
    (3, "command", Kind::StrList),
    (4, "args", Kind::StrList),
    (5, "workingDir", Kind::Str),
    (6, "ports", Kind::MsgList(CONTAINER_PORT)),
    (7, "env", Kind::MsgList(ENV_VAR)),
    (8, "resources", Kind::Msg(RESOURCE_REQUIREMENTS)),
    (9, "volumeMounts", Kind::MsgList(VOLUME_MOUNT)),
    (10, "livenessProbe", Kind::Msg(PROBE)),
    (11, "readinessProbe", Kind::Msg(PROBE)),
    (
        12,
        "lifecycle",
        Kind::Msg(&[
            (1, "postStart", Kind::Msg(LIFECYCLE_HANDLER)),
            (2, "preStop", Kind::Msg(LIFECYCLE_HANDLER)),
        ]),
    ),
    (13, "terminationMessagePath", Kind::Str),
    (14, "imagePullPolicy", Kind::Str),
    (15, "securityContext", Kind::Msg(SECURITY_CONTEXT)),
    (16, "stdin", Kind::Flag),
    (17, "stdinOnce", Kind::Flag),
    (18, "tty", Kind::Flag),
    (19, "envFrom", Kind::MsgList(ENV_FROM_SOURCE)),
    (20, "terminationMessagePolicy", Kind::Str),
    (22, "startupProbe", Kind::Msg(PROBE)),
    (24, "restartPolicy", Kind::Str),
];

/// The volume sources an imperative command or a simple manifest uses; others are skipped.
const VOLUME_SOURCE: &[Field] = &[
    (
        1,
        "hostPath",
        Kind::Msg(&[(1, "path", Kind::Str), (2, "type", Kind::Str)]),
    ),
    (
        2,
        "emptyDir",
        Kind::Msg(&[(1, "medium", Kind::Str), (2, "sizeLimit", Kind::Quantity)]),
    ),
    (
        6,
        "secret",
        Kind::Msg(&[
            (1, "secretName", Kind::Str),
            (2, "items", Kind::MsgList(KEY_TO_PATH)),
            (3, "defaultMode", Kind::Num),
            (4, "optional", Kind::Bool),
        ]),
    ),
    (
        10,
        "persistentVolumeClaim",
        Kind::Msg(&[(1, "claimName", Kind::Str), (2, "readOnly", Kind::Flag)]),
    ),
    (
        19,
        "configMap",
        Kind::Msg(&[
            (1, "", Kind::Inline(LOCAL_OBJECT_REFERENCE)),
            (2, "items", Kind::MsgList(KEY_TO_PATH)),
            (3, "defaultMode", Kind::Num),
            (4, "optional", Kind::Bool),
        ]),
    ),
];

const POD_SPEC: &[Field] = &[
    (
        1,
        "volumes",
        Kind::MsgList(&[(1, "name", Kind::Str), (2, "", Kind::Inline(VOLUME_SOURCE))]),
    ),
    (2, "containers", Kind::MsgList(CONTAINER)),
    (3, "restartPolicy", Kind::Str),
    (4, "terminationGracePeriodSeconds", Kind::Num),
    (5, "activeDeadlineSeconds", Kind::Num),
    (6, "dnsPolicy", Kind::Str),
    (7, "nodeSelector", Kind::StrMap),
    (8, "serviceAccountName", Kind::Str),
    (9, "serviceAccount", Kind::Str),
    (10, "nodeName", Kind::Str),
    (11, "hostNetwork", Kind::Flag),
    (12, "hostPID", Kind::Flag),
    (13, "hostIPC", Kind::Flag),
    (
        14,
        "securityContext",
        Kind::Msg(&[
            (2, "runAsUser", Kind::Num),
            (3, "runAsNonRoot", Kind::Bool),
            (5, "fsGroup", Kind::Num),
            (6, "runAsGroup", Kind::Num),
        ]),
    ),
    (
        15,
        "imagePullSecrets",
        Kind::MsgList(LOCAL_OBJECT_REFERENCE),
    ),
    (16, "hostname", Kind::Str),
    (17, "subdomain", Kind::Str),
    (19, "schedulerName", Kind::Str),
    (20, "initContainers", Kind::MsgList(CONTAINER)),
    (21, "automountServiceAccountToken", Kind::Bool),
    (
        22,
        "tolerations",
        Kind::MsgList(&[
            (1, "key", Kind::Str),
            (2, "operator", Kind::Str),
            (3, "value", Kind::Str),
            (4, "effect", Kind::Str),
            (5, "tolerationSeconds", Kind::Num),
        ]),
    ),
    (
        23,
        "hostAliases",
        Kind::MsgList(&[(1, "ip", Kind::Str), (2, "hostnames", Kind::StrList)]),
    ),
    (24, "priorityClassName", Kind::Str),
    (25, "priority", Kind::Num),
    (27, "shareProcessNamespace", Kind::Bool),
    (29, "runtimeClassName", Kind::Str),
    (30, "enableServiceLinks", Kind::Bool),
    (31, "preemptionPolicy", Kind::Str),
    (35, "setHostnameAsFQDN", Kind::Bool),
    (37, "hostUsers", Kind::Bool),
];

const POD_TEMPLATE_SPEC: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(POD_SPEC)),
];

/// Pod; its status (3) is the server's.
const POD: &[Field] = POD_TEMPLATE_SPEC;

const DEPLOYMENT: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (1, "replicas", Kind::Num),
            (2, "selector", Kind::Msg(LABEL_SELECTOR)),
            (3, "template", Kind::Msg(POD_TEMPLATE_SPEC)),
            (
                4,
                "strategy",
                Kind::Msg(&[
                    (1, "type", Kind::Str),
                    (
                        2,
                        "rollingUpdate",
                        Kind::Msg(&[
                            (1, "maxUnavailable", Kind::IntOrStr),
                            (2, "maxSurge", Kind::IntOrStr),
                        ]),
                    ),
                ]),
            ),
            (5, "minReadySeconds", Kind::Int),
            (6, "revisionHistoryLimit", Kind::Num),
            (7, "paused", Kind::Flag),
            (9, "progressDeadlineSeconds", Kind::Num),
        ]),
    ),
];

const JOB_SPEC: &[Field] = &[
    (1, "parallelism", Kind::Num),
    (2, "completions", Kind::Num),
    (3, "activeDeadlineSeconds", Kind::Num),
    (4, "selector", Kind::Msg(LABEL_SELECTOR)),
    (5, "manualSelector", Kind::Bool),
    (6, "template", Kind::Msg(POD_TEMPLATE_SPEC)),
    (7, "backoffLimit", Kind::Num),
    (8, "ttlSecondsAfterFinished", Kind::Num),
    (9, "completionMode", Kind::Str),
    (10, "suspend", Kind::Bool),
    (12, "backoffLimitPerIndex", Kind::Num),
    (13, "maxFailedIndexes", Kind::Num),
    (14, "podReplacementPolicy", Kind::Str),
    (15, "managedBy", Kind::Str),
];

const JOB: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(JOB_SPEC)),
];

const CRON_JOB: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (1, "schedule", Kind::Str),
            (2, "startingDeadlineSeconds", Kind::Num),
            (3, "concurrencyPolicy", Kind::Str),
            (4, "suspend", Kind::Bool),
            (5, "jobTemplate", Kind::Msg(JOB)),
            (6, "successfulJobsHistoryLimit", Kind::Num),
            (7, "failedJobsHistoryLimit", Kind::Num),
            (8, "timeZone", Kind::Str),
        ]),
    ),
];

const SERVICE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (
                1,
                "ports",
                Kind::MsgList(&[
                    (1, "name", Kind::Str),
                    (2, "protocol", Kind::Str),
                    (3, "port", Kind::Num),
                    (4, "targetPort", Kind::IntOrStrOmitZero),
                    (5, "nodePort", Kind::Int),
                    (6, "appProtocol", Kind::Str),
                ]),
            ),
            (2, "selector", Kind::StrMap),
            (3, "clusterIP", Kind::Str),
            (4, "type", Kind::Str),
            (5, "externalIPs", Kind::StrList),
            (7, "sessionAffinity", Kind::Str),
            (8, "loadBalancerIP", Kind::Str),
            (9, "loadBalancerSourceRanges", Kind::StrList),
            (10, "externalName", Kind::Str),
            (11, "externalTrafficPolicy", Kind::Str),
            (12, "healthCheckNodePort", Kind::Int),
            (13, "publishNotReadyAddresses", Kind::Flag),
            (17, "ipFamilyPolicy", Kind::Str),
            (18, "clusterIPs", Kind::StrList),
            (19, "ipFamilies", Kind::StrList),
            (20, "allocateLoadBalancerNodePorts", Kind::Bool),
            (21, "loadBalancerClass", Kind::Str),
            (22, "internalTrafficPolicy", Kind::Str),
            (23, "trafficDistribution", Kind::Str),
        ]),
    ),
];

const INGRESS_BACKEND: &[Field] = &[
    (
        3,
        "resource",
        Kind::Msg(&[
            (1, "apiGroup", Kind::Str),
            (2, "kind", Kind::Str),
            (3, "name", Kind::Str),
        ]),
    ),
    (
        4,
        "service",
        Kind::Msg(&[
            (1, "name", Kind::Str),
            (
                2,
                "port",
                Kind::Msg(&[(1, "name", Kind::Str), (2, "number", Kind::Int)]),
            ),
        ]),
    ),
];

const INGRESS: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (1, "defaultBackend", Kind::Msg(INGRESS_BACKEND)),
            (
                2,
                "tls",
                Kind::MsgList(&[(1, "hosts", Kind::StrList), (2, "secretName", Kind::Str)]),
            ),
            (
                3,
                "rules",
                Kind::MsgList(&[
                    (1, "host", Kind::Str),
                    (
                        2,
                        "",
                        Kind::Inline(&[(
                            1,
                            "http",
                            Kind::Msg(&[(
                                1,
                                "paths",
                                Kind::MsgList(&[
                                    (1, "path", Kind::Str),
                                    (2, "backend", Kind::Msg(INGRESS_BACKEND)),
                                    (3, "pathType", Kind::Str),
                                ]),
                            )]),
                        )]),
                    ),
                ]),
            ),
            (4, "ingressClassName", Kind::Str),
        ]),
    ),
];

const POD_DISRUPTION_BUDGET: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (1, "minAvailable", Kind::IntOrStr),
            (2, "selector", Kind::Msg(LABEL_SELECTOR)),
            (3, "maxUnavailable", Kind::IntOrStr),
            (4, "unhealthyPodEvictionPolicy", Kind::Str),
        ]),
    ),
];

/// autoscaling/v1, which `kubectl autoscale` writes.
const HORIZONTAL_POD_AUTOSCALER_V1: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (
                1,
                "scaleTargetRef",
                Kind::Msg(&[
                    (1, "kind", Kind::Str),
                    (2, "name", Kind::Str),
                    (3, "apiVersion", Kind::Str),
                ]),
            ),
            (2, "minReplicas", Kind::Num),
            (3, "maxReplicas", Kind::Num),
            (4, "targetCPUUtilizationPercentage", Kind::Num),
        ]),
    ),
];

const PRIORITY_CLASS: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "value", Kind::Num),
    (3, "globalDefault", Kind::Flag),
    (4, "description", Kind::Str),
    (5, "preemptionPolicy", Kind::Str),
];

const RESOURCE_QUOTA: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (1, "hard", Kind::QuantityMap),
            (2, "scopes", Kind::StrList),
            (
                3,
                "scopeSelector",
                Kind::Msg(&[(
                    1,
                    "matchExpressions",
                    Kind::MsgList(&[
                        (1, "scopeName", Kind::Str),
                        (2, "operator", Kind::Str),
                        (3, "values", Kind::StrList),
                    ]),
                )]),
            ),
        ]),
    ),
];

/// CertificateSigningRequest; `kubectl certificate approve|deny` writes its status conditions.
const CERTIFICATE_SIGNING_REQUEST: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (1, "request", Kind::Bytes),
            (2, "username", Kind::Str),
            (3, "uid", Kind::Str),
            (4, "groups", Kind::StrList),
            (5, "usages", Kind::StrList),
            (7, "signerName", Kind::Str),
            (8, "expirationSeconds", Kind::Num),
        ]),
    ),
    (
        3,
        "status",
        Kind::Msg(&[
            (
                1,
                "conditions",
                Kind::MsgList(&[
                    (1, "type", Kind::Str),
                    (2, "reason", Kind::Str),
                    (3, "message", Kind::Str),
                    (4, "lastUpdateTime", Kind::Time),
                    (5, "lastTransitionTime", Kind::Time),
                    (6, "status", Kind::Str),
                ]),
            ),
            (2, "certificate", Kind::Bytes),
        ]),
    ),
];

/// TokenRequest (`kubectl create token`); its status is the server's answer.
const TOKEN_REQUEST: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Kind::Msg(&[
            (1, "audiences", Kind::StrList),
            (
                3,
                "boundObjectRef",
                Kind::Msg(&[
                    (1, "kind", Kind::Str),
                    (2, "apiVersion", Kind::Str),
                    (3, "name", Kind::Str),
                    (4, "uid", Kind::Str),
                ]),
            ),
            (4, "expirationSeconds", Kind::Num),
        ]),
    ),
];

/// The schema of a kind this module decodes.
fn schema(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    Some(match (api_version, kind) {
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("v1", "Pod") => POD,
        ("v1", "Service") => SERVICE,
        ("v1", "ResourceQuota") => RESOURCE_QUOTA,
        ("apps/v1", "Deployment") => DEPLOYMENT,
        ("batch/v1", "Job") => JOB,
        ("batch/v1", "CronJob") => CRON_JOB,
        ("networking.k8s.io/v1", "Ingress") => INGRESS,
        ("policy/v1", "PodDisruptionBudget") => POD_DISRUPTION_BUDGET,
        ("autoscaling/v1", "HorizontalPodAutoscaler") => HORIZONTAL_POD_AUTOSCALER_V1,
        ("scheduling.k8s.io/v1", "PriorityClass") => PRIORITY_CLASS,
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => CERTIFICATE_SIGNING_REQUEST,
        ("authentication.k8s.io/v1", "TokenRequest") => TOKEN_REQUEST,
        ("rbac.authorization.k8s.io/v1", "Role") => ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => ROLE_BINDING,
        _ => return None,
    })
}

/// Why a body could not be decoded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// Well-formed, but of a kind this server has no protobuf schema for.
    UnknownKind(String),
    /// Not a valid Kubernetes protobuf body.
    Malformed(String),
}

/// Decodes a Kubernetes protobuf body into the object's JSON form.
pub(crate) fn decode(body: &[u8]) -> Result<Value, DecodeError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| DecodeError::Malformed("missing the k8s protobuf prefix".to_owned()))?;
    let mut type_meta = Value::Null;
    let mut raw: &[u8] = &[];
    for item in Fields::new(envelope) {
        match item.map_err(DecodeError::Malformed)? {
            (1, Wire::Bytes(b)) => type_meta = message(b, TYPE_META)?,
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let api_version = type_meta["apiVersion"].as_str().unwrap_or_default();
    let kind = type_meta["kind"].as_str().unwrap_or_default();
    let fields = schema(api_version, kind)
        .ok_or_else(|| DecodeError::UnknownKind(format!("{api_version}, Kind={kind}")))?;
    let mut obj = message(raw, fields)?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

/// One field's value on the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The (number, value) pairs of a message.
struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| "truncated varint".to_owned())?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".to_owned())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err("truncated field".to_owned());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn next_field(&mut self) -> Result<(u64, Wire<'a>), String> {
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| "field too long")?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            t => return Err(format!("unsupported wire type {t}")),
        };
        Ok((key >> 3, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Wire<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let item = self.next_field();
        if item.is_err() {
            // Nothing after a malformed field can be trusted.
            self.buf = &[];
        }
        Some(item)
    }
}

fn malformed(field: &str) -> DecodeError {
    DecodeError::Malformed(format!("field {field} has the wrong wire type"))
}

fn text(b: &[u8], field: &str) -> Result<String, DecodeError> {
    String::from_utf8(b.to_vec())
        .map_err(|_| DecodeError::Malformed(format!("field {field} is not UTF-8")))
}

/// A map entry: key 1, value 2.
fn entry<'a>(b: &'a [u8], field: &str) -> Result<(String, &'a [u8]), DecodeError> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for item in Fields::new(b) {
        match item.map_err(DecodeError::Malformed)? {
            (1, Wire::Bytes(k)) => key = text(k, field)?,
            (2, Wire::Bytes(v)) => value = v,
            _ => {}
        }
    }
    Ok((key, value))
}

/// Decodes a message by its schema; unset fields are left out, as Go's JSON encoding does.
fn message(buf: &[u8], schema: &[Field]) -> Result<Value, DecodeError> {
    let mut out = Map::new();
    for item in Fields::new(buf) {
        let (number, wire) = item.map_err(DecodeError::Malformed)?;
        let Some(&(_, name, kind)) = schema.iter().find(|f| f.0 == number) else {
            continue;
        };
        let value = match (kind, wire) {
            (Kind::Str | Kind::Bytes, Wire::Bytes([])) | (Kind::Int, Wire::Varint(0)) => continue,
            (Kind::Flag, Wire::Varint(0)) => continue,
            (Kind::Str, Wire::Bytes(b)) => json!(text(b, name)?),
            // Integers travel as the two's complement bits of an int64.
            (Kind::Int | Kind::Num, Wire::Varint(v)) => json!(signed(v)),
            (Kind::Bool | Kind::Flag, Wire::Varint(v)) => json!(v != 0),
            (Kind::Time, Wire::Bytes(b)) => {
                let t = message(b, &[(1, "seconds", Kind::Int)])?;
                match t["seconds"].as_i64().and_then(|s| u64::try_from(s).ok()) {
                    Some(s) => json!(emco_core::time::rfc3339(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(s)
                    )),
                    None => continue,
                }
            }
            (Kind::Msg(fields), Wire::Bytes(b)) => message(b, fields)?,
            (Kind::Inline(fields), Wire::Bytes(b)) => {
                if let Value::Object(m) = message(b, fields)? {
                    out.extend(m);
                }
                continue;
            }
            (Kind::MsgList(fields), Wire::Bytes(b)) => {
                push(&mut out, name, message(b, fields)?);
                continue;
            }
            (Kind::StrList, Wire::Bytes(b)) => {
                push(&mut out, name, json!(text(b, name)?));
                continue;
            }
            (Kind::StrMap, Wire::Bytes(b)) => {
                let (k, v) = entry(b, name)?;
                insert(&mut out, name, k, json!(text(v, name)?));
                continue;
            }
            (Kind::BytesMap, Wire::Bytes(b)) => {
                let (k, v) = entry(b, name)?;
                insert(&mut out, name, k, json!(base64_text(v)));
                continue;
            }
            (Kind::Bytes, Wire::Bytes(b)) => json!(base64_text(b)),
            (Kind::Quantity, Wire::Bytes(b)) => quantity(b, name)?,
            (Kind::QuantityMap, Wire::Bytes(b)) => {
                let (k, v) = entry(b, name)?;
                insert(&mut out, name, k, quantity(v, name)?);
                continue;
            }
            (Kind::IntOrStr, Wire::Bytes(b)) => int_or_string(b, name)?,
            (Kind::IntOrStrOmitZero, Wire::Bytes(b)) => match int_or_string(b, name)? {
                v if v == json!(0) => continue,
                v => v,
            },
            _ => return Err(malformed(name)),
        };
        out.insert(name.to_owned(), value);
    }
    Ok(Value::Object(out))
}

fn signed(v: u64) -> i64 {
    i64::from_ne_bytes(v.to_ne_bytes())
}

fn base64_text(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A `resource.Quantity`: its canonical string (field 1).
fn quantity(b: &[u8], field: &str) -> Result<Value, DecodeError> {
    let q = message(b, &[(1, "string", Kind::Str)])?;
    q.get("string")
        .cloned()
        .ok_or_else(|| DecodeError::Malformed(format!("field {field} has an empty quantity")))
}

/// An `intstr.IntOrString`: type 1 (0 int, 1 string), intVal 2, strVal 3.
fn int_or_string(b: &[u8], field: &str) -> Result<Value, DecodeError> {
    let (mut is_str, mut int, mut text_val) = (false, 0i64, String::new());
    for item in Fields::new(b) {
        match item.map_err(DecodeError::Malformed)? {
            (1, Wire::Varint(t)) => is_str = t == 1,
            (2, Wire::Varint(v)) => int = signed(v),
            (3, Wire::Bytes(s)) => text_val = text(s, field)?,
            _ => {}
        }
    }
    Ok(if is_str { json!(text_val) } else { json!(int) })
}

fn push(out: &mut Map<String, Value>, name: &str, v: Value) {
    if let Value::Array(a) = out.entry(name).or_insert_with(|| json!([])) {
        a.push(v);
    }
}

fn insert(out: &mut Map<String, Value>, name: &str, key: String, v: Value) {
    if let Value::Object(m) = out.entry(name).or_insert_with(|| json!({})) {
        m.insert(key, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn bytes_field(n: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn entry_bytes(k: &str, v: &[u8]) -> Vec<u8> {
        let mut e = Vec::new();
        bytes_field(1, k.as_bytes(), &mut e);
        bytes_field(2, v, &mut e);
        e
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        bytes_field(1, api_version.as_bytes(), &mut tm);
        bytes_field(2, kind.as_bytes(), &mut tm);
        let mut out = MAGIC.to_vec();
        bytes_field(1, &tm, &mut out);
        bytes_field(2, raw, &mut out);
        bytes_field(3, b"", &mut out);
        out
    }

    #[test]
    fn decodes_a_secret() {
        let mut meta = Vec::new();
        bytes_field(1, b"s", &mut meta);
        bytes_field(2, b"", &mut meta);
        varint(7 << 3, &mut meta);
        varint(0, &mut meta);
        bytes_field(8, b"", &mut meta);
        bytes_field(11, &entry_bytes("app", b"web"), &mut meta);
        bytes_field(14, b"f1", &mut meta);
        bytes_field(14, b"f2", &mut meta);
        let mut raw = Vec::new();
        bytes_field(1, &meta, &mut raw);
        bytes_field(2, &entry_bytes("k", b"\x00\xff"), &mut raw);
        bytes_field(3, b"Opaque", &mut raw);
        varint(5 << 3, &mut raw);
        varint(1, &mut raw);
        bytes_field(99, b"ignored", &mut raw);
        let obj = decode(&envelope("v1", "Secret", &raw)).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "immutable": true,
                "metadata": {"name": "s", "labels": {"app": "web"}, "finalizers": ["f1", "f2"]},
                "data": {"k": "AP8="}})
        );
    }

    #[test]
    fn rejects_unknown_kinds_and_garbage() {
        assert_eq!(
            decode(&envelope("apps/v1", "StatefulSet", b"")),
            Err(DecodeError::UnknownKind(
                "apps/v1, Kind=StatefulSet".to_owned()
            ))
        );
        assert!(matches!(decode(b"{}"), Err(DecodeError::Malformed(_))));
        let mut truncated = envelope("v1", "Secret", b"");
        truncated.extend_from_slice(&[0x12, 0x05, 0x0a]);
        assert!(matches!(decode(&truncated), Err(DecodeError::Malformed(_))));
        let wrong_wire = envelope("v1", "Secret", &[0x18, 0x01]);
        assert!(matches!(
            decode(&wrong_wire),
            Err(DecodeError::Malformed(_))
        ));
    }

    /// A message under construction, field by field, as Go's generated marshallers write them.
    #[derive(Default, Clone)]
    struct Pb(Vec<u8>);

    impl Pb {
        fn s(mut self, n: u64, v: &str) -> Self {
            bytes_field(n, v.as_bytes(), &mut self.0);
            self
        }
        fn i(mut self, n: u64, v: i64) -> Self {
            varint(n << 3, &mut self.0);
            varint(v as u64, &mut self.0);
            self
        }
        fn m(mut self, n: u64, v: Pb) -> Self {
            bytes_field(n, &v.0, &mut self.0);
            self
        }
        fn kv(self, n: u64, k: &str, v: &str) -> Self {
            self.m(n, Pb::default().s(1, k).s(2, v))
        }
        fn kq(self, n: u64, k: &str, q: &str) -> Self {
            self.m(n, Pb::default().s(1, k).m(2, Pb::default().s(1, q)))
        }
    }

    fn meta(name: &str) -> Pb {
        Pb::default().s(1, name).s(2, "").m(8, Pb::default())
    }

    fn int_or_str_int(v: i64) -> Pb {
        Pb::default().i(1, 0).i(2, v).s(3, "")
    }

    fn int_or_str_str(v: &str) -> Pb {
        Pb::default().i(1, 1).i(2, 0).s(3, v)
    }

    fn obj(api_version: &str, kind: &str, body: Pb) -> Value {
        decode(&envelope(api_version, kind, &body.0)).unwrap()
    }

    fn container() -> Pb {
        Pb::default()
            .s(1, "web")
            .s(2, "nginx:1.27")
            .s(3, "sh")
            .s(4, "-c")
            .s(4, "serve")
            .s(5, "")
            .m(6, Pb::default().s(1, "http").i(2, 0).i(3, 80).s(4, "TCP"))
            .m(7, Pb::default().s(1, "A").s(2, "b"))
            .m(
                7,
                Pb::default().s(1, "S").m(
                    3,
                    Pb::default().m(4, Pb::default().m(1, Pb::default().s(1, "sec")).s(2, "k")),
                ),
            )
            .m(
                8,
                Pb::default().kq(1, "cpu", "200m").kq(2, "memory", "64Mi"),
            )
            .m(9, Pb::default().s(1, "data").i(2, 0).s(3, "/data"))
            .m(
                10,
                Pb::default()
                    .m(
                        1,
                        Pb::default().m(
                            2,
                            Pb::default().s(1, "/healthz").m(2, int_or_str_str("http")),
                        ),
                    )
                    .i(2, 5)
                    .i(3, 0),
            )
            .m(
                11,
                Pb::default().m(
                    1,
                    Pb::default().m(3, Pb::default().m(1, int_or_str_int(80))),
                ),
            )
            .s(13, "")
            .s(14, "IfNotPresent")
            .m(15, Pb::default().i(2, 1))
            .i(16, 0)
            .i(17, 0)
            .i(18, 1)
            .m(
                19,
                Pb::default().m(2, Pb::default().m(1, Pb::default().s(1, "cm"))),
            )
    }

    fn pod_spec() -> Pb {
        Pb::default()
            .m(
                1,
                Pb::default().s(1, "data").m(
                    2,
                    Pb::default().m(19, Pb::default().m(1, Pb::default().s(1, "cm")).i(3, 420)),
                ),
            )
            .m(
                1,
                Pb::default()
                    .s(1, "tmp")
                    .m(2, Pb::default().m(2, Pb::default().s(1, ""))),
            )
            .m(2, container())
            .s(3, "Always")
            .i(4, 30)
            .s(6, "ClusterFirst")
            .kv(7, "disk", "ssd")
            .s(8, "robot")
            .i(11, 0)
            .m(14, Pb::default())
            .m(15, Pb::default().s(1, "pull"))
            .m(
                22,
                Pb::default().s(1, "k").s(2, "Exists").s(4, "NoSchedule"),
            )
            .i(25, -5)
            .i(30, 0)
    }

    fn template() -> Pb {
        Pb::default()
            .m(1, Pb::default().s(1, "").kv(11, "app", "web"))
            .m(2, pod_spec())
    }

    fn expected_pod_spec() -> Value {
        json!({
            "volumes": [{"name": "data", "configMap": {"name": "cm", "defaultMode": 420}},
                        {"name": "tmp", "emptyDir": {}}],
            "containers": [{
                "name": "web", "image": "nginx:1.27", "command": ["sh"], "args": ["-c", "serve"],
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "b"},
                        {"name": "S", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "k"}}}],
                "resources": {"limits": {"cpu": "200m"}, "requests": {"memory": "64Mi"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                                  "initialDelaySeconds": 5},
                "readinessProbe": {"tcpSocket": {"port": 80}},
                "imagePullPolicy": "IfNotPresent",
                "securityContext": {"privileged": true},
                "tty": true,
                "envFrom": [{"configMapRef": {"name": "cm"}}],
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "nodeSelector": {"disk": "ssd"},
            "serviceAccountName": "robot", "securityContext": {},
            "imagePullSecrets": [{"name": "pull"}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "priority": -5, "enableServiceLinks": false,
        })
    }

    #[test]
    fn decodes_a_deployment_and_its_pod_template() {
        let spec = Pb::default()
            .i(1, 0)
            .m(2, Pb::default().kv(1, "app", "web"))
            .m(3, template())
            .m(
                4,
                Pb::default().s(1, "RollingUpdate").m(
                    2,
                    Pb::default()
                        .m(1, int_or_str_str("25%"))
                        .m(2, int_or_str_int(1)),
                ),
            )
            .i(5, 0)
            .i(6, 10)
            .i(7, 0)
            .i(9, 600);
        let body = Pb::default()
            .m(1, meta("web"))
            .m(2, spec)
            .m(3, Pb::default().i(1, 7));
        let d = obj("apps/v1", "Deployment", body);
        assert_eq!(
            d,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": expected_pod_spec()},
                    "strategy": {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
                    "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}})
        );
        let pod = obj("v1", "Pod", Pb::default().m(1, meta("p")).m(2, pod_spec()));
        assert_eq!(pod["spec"], expected_pod_spec());
    }

    #[test]
    fn decodes_jobs_and_cronjobs() {
        let job_spec = Pb::default()
            .i(2, 3)
            .m(6, template())
            .i(7, 0)
            .i(8, 100)
            .s(9, "Indexed")
            .i(10, 0);
        let job = obj(
            "batch/v1",
            "Job",
            Pb::default().m(1, meta("j")).m(2, job_spec.clone()),
        );
        assert_eq!(job["spec"]["completions"], 3);
        assert_eq!(job["spec"]["backoffLimit"], 0);
        assert_eq!(job["spec"]["ttlSecondsAfterFinished"], 100);
        assert_eq!(job["spec"]["completionMode"], "Indexed");
        assert_eq!(job["spec"]["suspend"], false);
        assert_eq!(job["spec"]["template"]["spec"], expected_pod_spec());
        let cj_spec = Pb::default()
            .s(1, "*/5 * * * *")
            .s(3, "Forbid")
            .i(4, 1)
            .m(5, Pb::default().m(1, meta("cj")).m(2, job_spec))
            .i(6, 0)
            .i(7, 2)
            .s(8, "Etc/UTC");
        let cj = obj(
            "batch/v1",
            "CronJob",
            Pb::default().m(1, meta("cj")).m(2, cj_spec),
        );
        let s = &cj["spec"];
        assert_eq!(s["schedule"], "*/5 * * * *");
        assert_eq!(s["concurrencyPolicy"], "Forbid");
        assert_eq!(s["suspend"], true);
        assert_eq!(s["successfulJobsHistoryLimit"], 0);
        assert_eq!(s["failedJobsHistoryLimit"], 2);
        assert_eq!(s["timeZone"], "Etc/UTC");
        assert_eq!(s["jobTemplate"]["metadata"]["name"], "cj");
        assert_eq!(s["jobTemplate"]["spec"]["completions"], 3);
    }

    #[test]
    fn decodes_services() {
        let port = |name: &str, port: i64, target: Pb| {
            Pb::default()
                .s(1, name)
                .s(2, "TCP")
                .i(3, port)
                .m(4, target)
                .i(5, 0)
        };
        let spec = Pb::default()
            .m(1, port("a", 80, int_or_str_int(8080)))
            .m(1, port("b", 443, int_or_str_int(0)))
            .m(1, port("c", 9000, int_or_str_str("metrics")))
            .kv(2, "app", "web")
            .s(3, "")
            .s(4, "NodePort")
            .s(5, "192.0.2.1")
            .s(7, "")
            .s(10, "")
            .i(13, 0)
            .s(19, "IPv4");
        let svc = obj(
            "v1",
            "Service",
            Pb::default().m(1, meta("s")).m(2, spec).m(3, Pb::default()),
        );
        assert_eq!(
            svc,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {
                "ports": [{"name": "a", "protocol": "TCP", "port": 80, "targetPort": 8080},
                          {"name": "b", "protocol": "TCP", "port": 443},
                          {"name": "c", "protocol": "TCP", "port": 9000, "targetPort": "metrics"}],
                "selector": {"app": "web"}, "type": "NodePort", "externalIPs": ["192.0.2.1"],
                "ipFamilies": ["IPv4"]}})
        );
        let ext = obj(
            "v1",
            "Service",
            Pb::default()
                .m(1, meta("x"))
                .m(2, Pb::default().s(4, "ExternalName").s(10, "example.com")),
        );
        assert_eq!(
            ext["spec"],
            json!({"type": "ExternalName", "externalName": "example.com"})
        );
    }

    #[test]
    fn decodes_ingresses() {
        let backend = |svc: &str, port: Pb| Pb::default().m(4, Pb::default().s(1, svc).m(2, port));
        let path = Pb::default()
            .s(1, "/bar")
            .m(2, backend("svc1", Pb::default().s(1, "").i(2, 8080)))
            .s(3, "Prefix");
        let rule = Pb::default()
            .s(1, "foo.com")
            .m(2, Pb::default().m(1, Pb::default().m(1, path)));
        let spec = Pb::default()
            .m(1, backend("def", Pb::default().s(1, "http").i(2, 0)))
            .m(2, Pb::default().s(1, "foo.com").s(2, "cert"))
            .m(3, rule)
            .s(4, "nginx");
        let ing = obj(
            "networking.k8s.io/v1",
            "Ingress",
            Pb::default().m(1, meta("i")).m(2, spec),
        );
        assert_eq!(
            ing["spec"],
            json!({
                "defaultBackend": {"service": {"name": "def", "port": {"name": "http"}}},
                "tls": [{"hosts": ["foo.com"], "secretName": "cert"}],
                "rules": [{"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Prefix",
                    "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}}]}}],
                "ingressClassName": "nginx",
            })
        );
    }

    #[test]
    fn decodes_autoscaling_v1_hpa() {
        let hpa = obj(
            "autoscaling/v1",
            "HorizontalPodAutoscaler",
            Pb::default().m(1, meta("web")).m(
                2,
                Pb::default()
                    .m(
                        1,
                        Pb::default().s(1, "Deployment").s(2, "web").s(3, "apps/v1"),
                    )
                    .i(2, 1)
                    .i(3, 5)
                    .i(4, 80),
            ),
        );
        assert_eq!(
            hpa["spec"],
            json!({"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                   "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 80})
        );
    }

    #[test]
    fn decodes_policy_scheduling_quota_and_rbac_kinds() {
        let pdb = obj(
            "policy/v1",
            "PodDisruptionBudget",
            Pb::default().m(1, meta("p")).m(
                2,
                Pb::default()
                    .m(1, int_or_str_int(0))
                    .m(2, Pb::default().kv(1, "app", "web"))
                    .s(4, "AlwaysAllow"),
            ),
        );
        assert_eq!(
            pdb["spec"],
            json!({"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}},
                   "unhealthyPodEvictionPolicy": "AlwaysAllow"})
        );
        let pc = obj(
            "scheduling.k8s.io/v1",
            "PriorityClass",
            Pb::default()
                .m(1, meta("low"))
                .i(2, -10)
                .i(3, 0)
                .s(4, "low")
                .s(5, "Never"),
        );
        assert_eq!(
            pc,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": "low"}, "value": -10, "description": "low",
                   "preemptionPolicy": "Never"})
        );
        let zero = obj(
            "scheduling.k8s.io/v1",
            "PriorityClass",
            Pb::default().m(1, meta("z")).i(2, 0).i(3, 1),
        );
        assert_eq!(zero["value"], 0);
        assert_eq!(zero["globalDefault"], true);
        let quota = obj(
            "v1",
            "ResourceQuota",
            Pb::default().m(1, meta("q")).m(
                2,
                Pb::default()
                    .kq(1, "cpu", "1")
                    .kq(1, "pods", "2")
                    .s(2, "BestEffort")
                    .m(
                        3,
                        Pb::default().m(
                            1,
                            Pb::default().s(1, "PriorityClass").s(2, "In").s(3, "high"),
                        ),
                    ),
            ),
        );
        assert_eq!(
            quota["spec"],
            json!({"hard": {"cpu": "1", "pods": "2"}, "scopes": ["BestEffort"],
                   "scopeSelector": {"matchExpressions": [
                       {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}})
        );
        let cr = obj(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            Pb::default().m(1, meta("agg")).m(
                3,
                Pb::default().m(1, Pb::default().kv(1, "rbac.example.com/agg", "true")),
            ),
        );
        assert_eq!(
            cr["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/agg": "true"}}]})
        );
        let csr = obj(
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            Pb::default()
                .m(1, meta("alice"))
                .m(
                    2,
                    Pb::default()
                        .s(1, "PEM")
                        .s(5, "client auth")
                        .s(7, "example.com/signer")
                        .i(8, 600),
                )
                .m(
                    3,
                    Pb::default()
                        .m(
                            1,
                            Pb::default()
                                .s(1, "Approved")
                                .s(2, "ByAdmin")
                                .s(3, "")
                                .s(6, "True"),
                        )
                        .s(2, ""),
                ),
        );
        assert_eq!(
            csr["spec"],
            json!({"request": "UEVN", "usages": ["client auth"],
                   "signerName": "example.com/signer", "expirationSeconds": 600})
        );
        assert_eq!(
            csr["status"],
            json!({"conditions": [{"type": "Approved", "reason": "ByAdmin", "status": "True"}]})
        );
        let tr = obj(
            "authentication.k8s.io/v1",
            "TokenRequest",
            Pb::default().m(1, meta("robot")).m(
                2,
                Pb::default()
                    .s(1, "api")
                    .m(3, Pb::default().s(1, "Pod").s(2, "v1").s(3, "p").s(4, "u1"))
                    .i(4, 3600),
            ),
        );
        assert_eq!(
            tr["spec"],
            json!({"audiences": ["api"], "expirationSeconds": 3600,
                   "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "u1"}})
        );
        // A Role has no aggregation rule: the field is skipped like any unknown one.
        let role = obj(
            "rbac.authorization.k8s.io/v1",
            "Role",
            Pb::default().m(1, meta("r")).m(3, Pb::default()),
        );
        assert!(role.get("aggregationRule").is_none());
    }
}
