{{/* The control plane: names, the checks of its high-availability values, and its pod
(for the Deployment of one replica, or the StatefulSet of 2 or more: see "High
availability" in the README). With controlPlane.replicas 1 nothing here changes what the
chart rendered before replicas existed. */}}

{{/* "true" when the control plane is replicated (controlPlane.replicas > 1), else "". */}}
{{- define "fastworker.controlPlane.replicated" -}}
{{- if gt (int .Values.controlPlane.replicas) 1 }}true{{ end -}}
{{- end -}}

{{/* The StatefulSet, its ServiceAccount and the Lease share this name. */}}
{{- define "fastworker.controlPlane.name" -}}
{{- printf "%s-control-plane" (include "fastworker.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fastworker.controlPlane.serviceAccount" -}}
{{- include "fastworker.controlPlane.name" . -}}
{{- end -}}

{{- define "fastworker.controlPlane.lease" -}}
{{- include "fastworker.controlPlane.name" . -}}
{{- end -}}

{{/* The headless Service giving each replica a stable name, <pod>.<peers>.<namespace>.svc,
resolvable before the pod is ready (followers never are). */}}
{{- define "fastworker.controlPlane.peers" -}}
{{- printf "%s-control-plane-peers" (include "fastworker.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fastworker.controlPlane.peersDomain" -}}
{{- printf "%s.%s.svc" (include "fastworker.controlPlane.peers" .) .Release.Namespace -}}
{{- end -}}

{{/* Where the leader serves its journal to followers (the control plane's default). */}}
{{- define "fastworker.controlPlane.replicationPort" -}}
{{- add .Values.ports.base 6 -}}
{{- end -}}

{{/* The --leader-election URL: controlPlane.ha.leaderElection (etcd://...), or the chart's
own Lease in the release's namespace. */}}
{{- define "fastworker.controlPlane.leaderElection" -}}
{{- .Values.controlPlane.ha.leaderElection | default (printf "kubernetes://%s/%s" .Release.Namespace (include "fastworker.controlPlane.lease" .)) -}}
{{- end -}}

{{/* "kubernetes" (the chart's Lease, Role and RoleBinding are rendered) or "etcd". */}}
{{- define "fastworker.controlPlane.election" -}}
{{- if hasPrefix "etcd://" (include "fastworker.controlPlane.leaderElection" .) }}etcd{{ else }}kubernetes{{ end -}}
{{- end -}}

{{/* Values a replicated control plane cannot run with: fail, saying why. Renders nothing. */}}
{{- define "fastworker.controlPlane.checkReplicas" -}}
{{- $persistence := .Values.controlPlane.persistence -}}
{{- if not $persistence.enabled -}}
{{- fail "controlPlane.replicas > 1 needs controlPlane.persistence.enabled: each replica keeps its copy of the journal on a claim of its own (--state-dir)" -}}
{{- end -}}
{{- if $persistence.existingClaim -}}
{{- fail "controlPlane.replicas > 1 cannot use controlPlane.persistence.existingClaim: each replica gets a claim of its own from the StatefulSet's volumeClaimTemplates" -}}
{{- end -}}
{{- if .Values.tls.enabled -}}
{{- fail "controlPlane.replicas > 1 does not support tls.enabled yet: a follower dials the leader's replication port, which needs the CA, and a control plane given the CA requires a certificate of every peer (mutual TLS), which the subworkers do not have" -}}
{{- end -}}
{{- end -}}

{{/* controlPlane.affinity, with (when replicated) a pod anti-affinity across nodes unless
it sets podAntiAffinity itself: preferred by default, required with
controlPlane.ha.antiAffinity. As YAML, or nothing. */}}
{{- define "fastworker.controlPlane.affinity" -}}
{{- $affinity := deepCopy (.Values.controlPlane.affinity | default dict) -}}
{{- if and (include "fastworker.controlPlane.replicated" .) (not (hasKey $affinity "podAntiAffinity")) -}}
{{- $selector := include "fastworker.selectorLabels" (dict "root" . "component" "control-plane") | fromYaml -}}
{{- $term := dict "labelSelector" (dict "matchLabels" $selector) "topologyKey" "kubernetes.io/hostname" -}}
{{- if eq .Values.controlPlane.ha.antiAffinity "required" -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) -}}
{{- else -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) -}}
{{- end -}}
{{- end -}}
{{- with $affinity }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* The control plane's pod template (metadata and spec): include with the root context,
under `template:` with nindent 4. */}}
{{- define "fastworker.controlPlane.pod" -}}
{{- $component := dict "root" . "component" "control-plane" -}}
{{- $ha := include "fastworker.controlPlane.replicated" . -}}
{{- $election := include "fastworker.controlPlane.election" . -}}
{{- $persistent := or $ha .Values.controlPlane.persistence.enabled -}}
metadata:
  labels:
    {{- include "fastworker.commonLabels" . | nindent 4 }}
    {{- include "fastworker.selectorLabels" $component | nindent 4 }}
    {{- with .Values.controlPlane.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- if .Values.telemetry.scrapeAnnotations }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ .Values.ports.http | quote }}
    prometheus.io/path: /metrics
    {{- end }}
    {{- with .Values.controlPlane.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  enableServiceLinks: false
  {{- if $ha }}
  serviceAccountName: {{ include "fastworker.controlPlane.serviceAccount" . }}
  # The Lease backend reads the service account's token; etcd needs none.
  automountServiceAccountToken: {{ ternary "true" "false" (eq $election "kubernetes") }}
  {{- else }}
  automountServiceAccountToken: false
  {{- end }}
  terminationGracePeriodSeconds: {{ add .Values.controlPlane.shutdownTimeout 15 }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: control-plane
      image: {{ include "fastworker.image" (dict "root" . "image" .Values.controlPlane.image) | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - --host=0.0.0.0
        {{- if not $ha }}
        - --advertise-host={{ include "fastworker.controlPlane.host" . }}
        {{- end }}
        - --base-port={{ .Values.ports.base }}
        - --discovery-port={{ .Values.ports.discovery }}
        - --http-port={{ .Values.ports.http }}
        - --local-concurrency={{ .Values.controlPlane.localConcurrency }}
        - --shutdown-timeout={{ .Values.controlPlane.shutdownTimeout }}
        {{- if $persistent }}
        - --state-dir={{ include "fastworker.controlPlane.stateDir" . }}
        {{- end }}
        {{- if $ha }}
        - --leader-election={{ include "fastworker.controlPlane.leaderElection" . }}
        - --lease-duration={{ .Values.controlPlane.ha.leaseDuration }}
        - --sync-replicas={{ .Values.controlPlane.ha.syncReplicas }}
        {{- if .Values.controlPlane.ha.requireSync }}
        - --require-sync
        {{- end }}
        - --replication-port={{ include "fastworker.controlPlane.replicationPort" . }}
        {{- end }}
        {{- range .Values.controlPlane.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      envFrom:
        - configMapRef:
            name: {{ include "fastworker.fullname" . }}
      {{- $env := print (include "fastworker.otelEnv" (dict "root" . "service" .Values.controlPlane.otelServiceName)) (include "fastworker.authEnv" .) (include "fastworker.tlsEnv" (dict "root" . "role" "server")) }}
      env:
        # Its own modules, over the ConfigMap's (the subworkers'): only what its image holds.
        - name: FASTWORKER_TASK_MODULES
          value: {{ join " " .Values.controlPlane.taskModules | quote }}
        {{- if $ha }}
        # Each replica advertises its own stable name (<pod>.<headless service>): the
        # addresses peers dial once discovery has led them to the leader, and the
        # replication port followers dial.
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: FASTWORKER_ADVERTISE_HOST
          value: {{ printf "$(POD_NAME).%s" (include "fastworker.controlPlane.peersDomain" .) | quote }}
        - name: FASTWORKER_REPLICA_ID
          value: $(POD_NAME)
        {{- end }}
        {{- with $env }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- with .Values.controlPlane.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - {name: discovery, containerPort: {{ .Values.ports.discovery }}, protocol: TCP}
        - {name: submit-critical, containerPort: {{ .Values.ports.base }}, protocol: TCP}
        - {name: submit-high, containerPort: {{ add .Values.ports.base 1 }}, protocol: TCP}
        - {name: submit-normal, containerPort: {{ add .Values.ports.base 2 }}, protocol: TCP}
        - {name: submit-low, containerPort: {{ add .Values.ports.base 3 }}, protocol: TCP}
        - {name: results, containerPort: {{ add .Values.ports.base 4 }}, protocol: TCP}
        - {name: registration, containerPort: {{ add .Values.ports.base 5 }}, protocol: TCP}
        - {name: http, containerPort: {{ .Values.ports.http }}, protocol: TCP}
        {{- if $ha }}
        - {name: replication, containerPort: {{ include "fastworker.controlPlane.replicationPort" . }}, protocol: TCP}
        {{- end }}
      {{- if $ha }}
      # A follower is alive but never ready: it starts once /healthz answers, and only
      # the leader passes /readyz, so the Service routes to the leader alone. Probed every
      # 2 s: a new leader gets traffic within about 2 s of winning its term.
      startupProbe:
        httpGet: {path: /healthz, port: http}
        periodSeconds: 2
        failureThreshold: 30
      readinessProbe:
        httpGet: {path: /readyz, port: http}
        periodSeconds: 2
        failureThreshold: 2
      {{- else }}
      startupProbe:
        httpGet: {path: /readyz, port: http}
        periodSeconds: 2
        failureThreshold: 30
      readinessProbe:
        httpGet: {path: /readyz, port: http}
        periodSeconds: 5
      {{- end }}
      livenessProbe:
        httpGet: {path: /healthz, port: http}
        periodSeconds: 10
        failureThreshold: 3
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      resources:
        {{- toYaml .Values.controlPlane.resources | nindent 8 }}
      volumeMounts:
        - {name: tmp, mountPath: /tmp}
        {{- if $persistent }}
        - {name: state, mountPath: {{ include "fastworker.controlPlane.stateDir" . }}}
        {{- end }}
        {{- if .Values.tls.enabled }}
        - {name: tls, mountPath: {{ include "fastworker.tlsDir" . | quote }}, readOnly: true}
        {{- end }}
  volumes:
    - name: tmp
      emptyDir: {}
    {{- if and $persistent (not $ha) }}
    - name: state
      persistentVolumeClaim:
        claimName: {{ include "fastworker.controlPlane.stateClaim" . }}
    {{- end }}
    {{- if .Values.tls.enabled }}
    {{- include "fastworker.tlsVolume" (dict "root" . "role" "server") | nindent 4 }}
    {{- end }}
  {{- with .Values.controlPlane.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.controlPlane.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with include "fastworker.controlPlane.affinity" . }}
  affinity:
    {{- . | nindent 4 }}
  {{- end }}
{{- end -}}
