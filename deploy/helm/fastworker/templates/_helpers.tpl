{{/* Names, labels and images shared by every template. */}}

{{- define "fastworker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fastworker.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The control plane's Service: the name subworkers dial and the control plane announces. */}}
{{- define "fastworker.controlPlane.service" -}}
{{- printf "%s-control-plane" (include "fastworker.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fastworker.controlPlane.host" -}}
{{- printf "%s.%s.svc" (include "fastworker.controlPlane.service" .) .Release.Namespace -}}
{{- end -}}

{{/* Where the control plane keeps its journal (--state-dir) when persistence is enabled,
and the PersistentVolumeClaim mounted there: yours (existingClaim) or the chart's. */}}
{{- define "fastworker.controlPlane.stateDir" -}}
/var/lib/fastworker
{{- end -}}

{{- define "fastworker.controlPlane.stateClaim" -}}
{{- .Values.controlPlane.persistence.existingClaim | default (printf "%s-control-plane-state" (include "fastworker.fullname" .) | trunc 63 | trimSuffix "-") -}}
{{- end -}}

{{/* The recommended app.kubernetes.io labels, less the selector ones. */}}
{{- define "fastworker.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fastworker
{{- end -}}

{{- define "fastworker.labels" -}}
{{ include "fastworker.commonLabels" . }}
app.kubernetes.io/name: {{ include "fastworker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector labels of one component: include with (dict "root" $ "component" "subworker"). */}}
{{- define "fastworker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fastworker.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "fastworker.image" -}}
{{- $tag := .image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- $registry := .root.Values.image.registry -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Tracing identity of one component: include with (dict "root" $ "service" "<name>").
Only when an OTLP endpoint is set; the pod and namespace become resource attributes. */}}
{{- define "fastworker.otelEnv" -}}
{{- if .root.Values.telemetry.otlpEndpoint }}
- name: OTEL_SERVICE_NAME
  value: {{ .service | quote }}
- name: K8S_POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: K8S_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE)"
{{- end }}
{{- end -}}

{{/* The Secret holding the auth token, and the env entry that reads it. */}}
{{- define "fastworker.authSecret" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "fastworker.fullname" .)) -}}
{{- end -}}

{{- define "fastworker.authEnv" -}}
{{- if .Values.auth.enabled }}
- name: FASTWORKER_AUTH_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "fastworker.authSecret" . }}
      key: {{ .Values.auth.secretKey }}
{{- end }}
{{- end -}}

{{/* TLS on the NNG sockets (tls.*). The scheme of every NNG address the chart writes: */}}
{{- define "fastworker.nngScheme" -}}
{{- if .Values.tls.enabled -}}tls+tcp://{{- else -}}tcp://{{- end -}}
{{- end -}}

{{/* The Secret with tls.crt, tls.key and ca.crt: tls.existingSecret, which must be set. */}}
{{- define "fastworker.tlsSecret" -}}
{{- if not .Values.tls.existingSecret -}}
{{- fail "tls.enabled needs tls.existingSecret: the name of a Secret holding tls.crt, tls.key and ca.crt (a cert-manager Certificate's secretName, or one made with kubectl create secret generic)" -}}
{{- end -}}
{{- .Values.tls.existingSecret -}}
{{- end -}}

{{- define "fastworker.tlsDir" -}}
{{- .Values.tls.mountPath | trimSuffix "/" -}}
{{- end -}}

{{/* What one pod gets of that Secret: include with (dict "root" $ "role" "server") for the
control plane (its certificate and key) or "client" (subworkers, the test pod: the CA only,
so the key never leaves the control plane): its environment entries, and its volume (when
tls.enabled), mounted read-only at tls.mountPath. */}}
{{- define "fastworker.tlsEnv" -}}
{{- if .root.Values.tls.enabled }}
{{- $dir := include "fastworker.tlsDir" .root }}
{{- if eq .role "server" }}
- name: FASTWORKER_TLS_CERT
  value: {{ printf "%s/tls.crt" $dir | quote }}
- name: FASTWORKER_TLS_KEY
  value: {{ printf "%s/tls.key" $dir | quote }}
{{- else }}
- name: FASTWORKER_TLS_CA
  value: {{ printf "%s/ca.crt" $dir | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "fastworker.tlsVolume" -}}
- name: tls
  secret:
    secretName: {{ include "fastworker.tlsSecret" .root | quote }}
    {{- if eq .role "server" }}
    defaultMode: 288  # 0440: the key is readable by the pod's fsGroup (10001) only
    {{- else }}
    defaultMode: 292  # 0444: a CA certificate is public
    items:
      - {key: ca.crt, path: ca.crt}
    {{- end }}
{{- end -}}

{{/* Worker pools. A copy of `base` with `over` laid on it key by key, as Helm coalesces
values: maps merge, anything else (lists included) replaces, null drops the key. Include with
(dict "base" $copy "over" $map): it changes `base` in place and renders nothing. */}}
{{- define "fastworker.overlay" -}}
{{- range $key, $value := .over }}
{{- $current := get $.base $key }}
{{- if and (kindIs "map" $value) (kindIs "map" $current) }}
{{- $merged := deepCopy $current }}
{{- include "fastworker.overlay" (dict "base" $merged "over" $value) }}
{{- $_ := set $.base $key $merged }}
{{- else if kindIs "invalid" $value }}
{{- $_ := unset $.base $key }}
{{- else }}
{{- $_ := set $.base $key $value }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The subworker pools to render: include with $ctx := (dict "root" $), then range over
$ctx.pools. Without subworker.pools, the one pool of old (name "", the Deployment
<fullname>-subworker with the selector it always had, so existing installs upgrade in
place); with it, one per entry, sorted by name, each <fullname>-subworker-<pool> with a
fastworker.io/pool label in its selector. Each pool's `values` are subworker.* with the
pool's own settings laid on top, except keda.query, which a pool never inherits (the shared
one cannot know its queues). Settings no pool can render with fail here, naming the pool. */}}
{{- define "fastworker.subworker.pools" -}}
{{- $root := .root }}
{{- $base := omit $root.Values.subworker "pools" }}
{{- $fullname := include "fastworker.fullname" $root }}
{{- $pools := list }}
{{- if $root.Values.subworker.pools }}
{{- range $name, $settings := $root.Values.subworker.pools }}
{{- $values := deepCopy $base }}
{{- $_ := set $values.keda "query" "" }}
{{- include "fastworker.overlay" (dict "base" $values "over" ($settings | default dict)) }}
{{- $object := printf "%s-subworker-%s" $fullname $name }}
{{- if gt (len $object) 63 }}
{{- fail (printf "subworker.pools.%s: its objects would be named %s, over 63 characters: shorten the pool's name (or set fullnameOverride)" $name $object) }}
{{- end }}
{{- $pools = append $pools (dict "name" $name "path" (printf "subworker.pools.%s" $name) "fullname" $object "values" $values) }}
{{- end }}
{{- else }}
{{- $pools = list (dict "name" "" "path" "subworker" "fullname" (printf "%s-subworker" $fullname) "values" (deepCopy $base)) }}
{{- end }}
{{- range $pools }}
{{- $v := .values }}
{{- if and $v.autoscaling.enabled $v.keda.enabled }}
{{- fail (printf "%s.autoscaling.enabled and %s.keda.enabled cannot both be true: choose one scaler (a pool takes what it leaves unset from subworker.*)" .path .path) }}
{{- end }}
{{- if and $v.autoscaling.enabled (not (dig "requests" "cpu" "" ($v.resources | default dict))) }}
{{- fail (printf "%s.autoscaling.enabled needs %s.resources.requests.cpu: the HorizontalPodAutoscaler's CPU target is a percent of the pods' CPU request, and without one it never scales" .path .path) }}
{{- end }}
{{- end }}
{{- $_ := set . "pools" $pools }}
{{- end -}}

{{/* The labels of one pool's objects, and the selector of its pods: (dict "root" $ "pool" $pool). */}}
{{- define "fastworker.subworker.labels" -}}
{{ include "fastworker.labels" .root }}
app.kubernetes.io/component: subworker
{{- with .pool.name }}
fastworker.io/pool: {{ . }}
{{- end }}
{{- end -}}

{{- define "fastworker.subworker.selectorLabels" -}}
{{ include "fastworker.selectorLabels" (dict "root" .root "component" "subworker") }}
{{- with .pool.name }}
fastworker.io/pool: {{ . }}
{{- end }}
{{- end -}}

{{/* A pool's queues (`name` or `name:weight`) as the --queues argument takes them, and as a
PromQL regular expression of their names (weights stripped, dots escaped; the other
characters a queue name may hold are not special). */}}
{{- define "fastworker.subworker.queues" -}}
{{- join "," .values.queues -}}
{{- end -}}

{{- define "fastworker.subworker.queueRegex" -}}
{{- $names := list }}
{{- range .values.queues }}
{{- $names = append $names (first (splitList ":" .) | replace "." "\\.") }}
{{- end }}
{{- join "|" $names -}}
{{- end -}}
