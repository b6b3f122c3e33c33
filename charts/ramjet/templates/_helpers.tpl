{{/*
Chart name, truncated to the 63 characters a label value allows.
*/}}
{{- define "ramjet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: <release>-<chart>, or <release> when it already contains the chart name.
*/}}
{{- define "ramjet.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ramjet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ramjet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ramjet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "ramjet.labels" -}}
helm.sh/chart: {{ include "ramjet.chart" . }}
{{ include "ramjet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ramjet
{{- end }}

{{- define "ramjet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ramjet.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ramjet.electionID" -}}
{{- default (printf "%s-leader" (include "ramjet.fullname" .)) .Values.controller.electionID | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The image reference: repository:tag@digest when a digest is given (what runs is
what was verified), else repository:tag. The tag defaults to the appVersion.
*/}}
{{- define "ramjet.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion | toString }}
{{- with .Values.image.digest }}
{{- if not (regexMatch "^sha256:[a-f0-9]{64}$" .) }}
{{- fail (printf "image.digest must look like sha256:<64 lowercase hex digits>, got %q" .) }}
{{- end }}
{{- printf "%s:%s@%s" $.Values.image.repository $tag . }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
True ("true") when any listener port is privileged (< 1024).
*/}}
{{- define "ramjet.lowPorts" -}}
{{- $p := .Values.controller.containerPorts }}
{{- if or (lt (int $p.http) 1024) (lt (int $p.https) 1024) (lt (int $p.admin) 1024) (lt (int $p.metrics) 1024) }}true{{ end }}
{{- end }}

{{/*
The lowest listener port, for net.ipv4.ip_unprivileged_port_start.
*/}}
{{- define "ramjet.lowestPort" -}}
{{- $p := .Values.controller.containerPorts }}
{{- min (int $p.http) (int $p.https) (int $p.admin) (int $p.metrics) }}
{{- end }}

{{/*
An int-or-string value (a count or a percentage) as YAML.
*/}}
{{- define "ramjet.intOrString" -}}
{{- if kindIs "string" . }}{{ . | quote }}{{ else }}{{ int . }}{{ end }}
{{- end }}

{{- define "ramjet.adminTokenDir" -}}/etc/ramjet/admin-token{{- end }}

{{- define "ramjet.seccompProfileName" -}}{{ include "ramjet.fullname" . }}-io-uring{{- end }}

{{- /* The Secret holding the admin token: the one named, else the one the chart makes; empty: none. */}}
{{- define "ramjet.adminTokenSecret" -}}
{{- $t := .Values.controller.adminToken }}
{{- if $t.secretName }}{{ $t.secretName }}{{ else if $t.generate }}{{ include "ramjet.fullname" . }}-admin-token{{ end }}
{{- end }}

{{- define "ramjet.adminTokenKey" -}}
{{- if .Values.controller.adminToken.secretName }}{{ .Values.controller.adminToken.key }}{{ else }}token{{ end }}
{{- end }}
{{- define "ramjet.defaultCertDir" -}}/etc/ramjet/default-certificate{{- end }}

{{- define "ramjet.configDir" -}}/etc/ramjet/config{{- end }}

{{/* The ConfigMap --config reads, if any: an existing one, or the chart's own. */}}
{{- define "ramjet.configMap" -}}
{{- $c := .Values.controller.config }}
{{- if $c.existingConfigMap }}{{ $c.existingConfigMap }}
{{- else if $c.enabled }}{{ include "ramjet.fullname" . }}-config
{{- end }}
{{- end }}

{{/*
Checks on values that the templates cannot express otherwise. Included once,
from the workload template, so a bad value fails the render with a message a
person can act on.
*/}}
{{- define "ramjet.validate" -}}
{{- $c := .Values.controller }}
{{- if not (has $c.kind (list "Deployment" "DaemonSet")) }}
{{- fail (printf "controller.kind must be Deployment or DaemonSet, got %q" (toString $c.kind)) }}
{{- end }}
{{- if not (has $c.ioDriver (list "io-uring" "auto" "legacy")) }}
{{- fail (printf "controller.ioDriver must be io-uring, auto or legacy, got %q" (toString $c.ioDriver)) }}
{{- end }}
{{- if not (has $c.logFormat (list "text" "json")) }}
{{- fail (printf "controller.logFormat must be text or json, got %q" (toString $c.logFormat)) }}
{{- end }}
{{- if not (has $c.accessLog.format (list "text" "json" "combined" "nginx-upstream")) }}
{{- fail (printf "controller.accessLog.format must be text, json, combined or nginx-upstream, got %q" (toString $c.accessLog.format)) }}
{{- end }}
{{- if not (has $c.accessLog.escape (list "default" "json" "none")) }}
{{- fail (printf "controller.accessLog.escape must be default, json or none, got %q" (toString $c.accessLog.escape)) }}
{{- end }}
{{- if not $c.accessLog.destination }}
{{- fail "controller.accessLog.destination must be stdout, stderr, a file path or off" }}
{{- end }}
{{- if or (lt (float64 $c.accessLog.successSample) 0.0) (gt (float64 $c.accessLog.successSample) 1.0) }}
{{- fail (printf "controller.accessLog.successSample must be between 0 and 1, got %v" $c.accessLog.successSample) }}
{{- end }}
{{- if and $c.autoscaling.enabled (ne $c.kind "Deployment") }}
{{- fail "controller.autoscaling needs controller.kind Deployment: a DaemonSet runs one pod per node" }}
{{- end }}
{{- if and $c.autoscaling.enabled (gt (int $c.autoscaling.minReplicas) (int $c.autoscaling.maxReplicas)) }}
{{- fail "controller.autoscaling.minReplicas must not exceed maxReplicas" }}
{{- end }}
{{- if not (regexMatch "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" (toString $c.clientAddress.forwardedForHeader)) }}
{{- fail (printf "controller.clientAddress.forwardedForHeader must be an HTTP field name, got %q" (toString $c.clientAddress.forwardedForHeader)) }}
{{- end }}
{{- if lt (int $c.historySize) 1 }}
{{- fail "controller.historySize must be at least 1" }}
{{- end }}
{{- if lt (int $c.workers) 0 }}
{{- fail "controller.workers must be 0 (one per CPU) or a positive number" }}
{{- end }}
{{- with $c.auditWebhook }}
{{- if not (hasPrefix "http://" .) }}
{{- fail (printf "controller.auditWebhook must be an http:// URL (ramjet refuses https:// and anything else), got %q" .) }}
{{- end }}
{{- end }}
{{- range $name, $port := $c.containerPorts }}
{{- if or (lt (int $port) 1) (gt (int $port) 65535) }}
{{- fail (printf "controller.containerPorts.%s must be a port number, got %v" $name $port) }}
{{- end }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled (the ServiceMonitor scrapes the metrics Service)" }}
{{- end }}
{{- end }}

{{/*
The daemon's command-line arguments. Each flag is one "--flag=value" item.
*/}}
{{- define "ramjet.args" -}}
{{- $c := .Values.controller }}
{{- $bind := $c.bindAddress }}
- {{ printf "--http-addr=%s:%d" $bind (int $c.containerPorts.http) | quote }}
- {{ printf "--https-addr=%s:%d" $bind (int $c.containerPorts.https) | quote }}
- {{ printf "--admin-addr=%s:%d" $bind (int $c.containerPorts.admin) | quote }}
- {{ printf "--metrics-addr=%s:%d" $bind (int $c.containerPorts.metrics) | quote }}
- {{ printf "--ingress-class=%s" .Values.ingressClass.name | quote }}
- {{ printf "--controller-name=%s" .Values.ingressClass.controllerValue | quote }}
- {{ printf "--gateway-api=%t" .Values.gatewayAPI.enabled | quote }}
- {{ printf "--gateway-controller-name=%s" .Values.gatewayAPI.controllerName | quote }}
- {{ printf "--election-id=%s" (include "ramjet.electionID" .) | quote }}
{{- if ne $c.auditEvents "all" }}
- {{ printf "--audit-events=%s" $c.auditEvents | quote }}
{{- end }}
- {{ printf "--io-driver=%s" $c.ioDriver | quote }}
- {{ printf "--history-size=%d" (int $c.historySize) | quote }}
- {{ printf "--log-format=%s" $c.logFormat | quote }}
- {{ printf "--access-log=%s" $c.accessLog.destination | quote }}
- {{ printf "--access-log-format=%s" $c.accessLog.format | quote }}
{{- with $c.accessLog.template }}
- {{ printf "--access-log-template=%s" . | quote }}
- {{ printf "--access-log-escape=%s" $c.accessLog.escape | quote }}
{{- end }}
{{- with $c.accessLog.skipPaths }}
- {{ printf "--access-log-skip-paths=%s" (join "," .) | quote }}
{{- end }}
{{- if $c.accessLog.errorsOnly }}
- "--access-log-errors-only"
{{- end }}
{{- if ne (float64 $c.accessLog.successSample) 1.0 }}
- {{ printf "--access-log-sample=%v" $c.accessLog.successSample | quote }}
{{- end }}
{{- if .Values.metrics.statusCodes }}
- "--metrics-status-codes"
{{- end }}
{{- if include "ramjet.configMap" . }}
- {{ printf "--config=%s" (include "ramjet.configDir" .) | quote }}
{{- end }}
{{- with $c.tracing }}
{{- if .otlpEndpoint }}
- {{ printf "--otlp-endpoint=%s" .otlpEndpoint | quote }}
- {{ printf "--trace-sample-ratio=%v" .sampleRatio | quote }}
- {{ printf "--trace-parent-based=%t" .parentBased | quote }}
- {{ printf "--trace-service-name=%s" .serviceName | quote }}
{{- if .operationName }}
- {{ printf "--trace-operation-name=%s" .operationName | quote }}
{{- end }}
{{- end }}
{{- end }}
- {{ printf "--upstream-timeout=%s" (toString $c.upstreamTimeout) | quote }}
- {{ printf "--header-timeout=%s" (toString $c.headerTimeout) | quote }}
- {{ printf "--shutdown-delay=%s" (toString $c.shutdownDelay) | quote }}
- {{ printf "--drain-timeout=%s" (toString $c.drainTimeout) | quote }}
{{- with $c.clientAddress }}
{{- $listeners := list }}
{{- if .proxyProtocol.http }}{{ $listeners = append $listeners "http" }}{{ end }}
{{- if .proxyProtocol.https }}{{ $listeners = append $listeners "https" }}{{ end }}
{{- if $listeners }}
- {{ printf "--proxy-protocol=%s" (join "," $listeners) | quote }}
- {{ printf "--proxy-protocol-timeout=%s" (toString .proxyProtocol.timeout) | quote }}
{{- end }}
{{- with .trustedProxies }}
- {{ printf "--trusted-proxies=%s" (join "," .) | quote }}
{{- end }}
{{- if .trustedProxiesAddressOnly }}
- "--trusted-proxies-address-only"
{{- end }}
{{- if ne .forwardedForHeader "X-Forwarded-For" }}
- {{ printf "--forwarded-for-header=%s" .forwardedForHeader | quote }}
{{- end }}
{{- if .computeFullForwardedFor }}
- "--compute-full-forwarded-for"
{{- end }}
{{- end }}
{{- if gt (int $c.workers) 0 }}
- {{ printf "--workers=%d" (int $c.workers) | quote }}
{{- end }}
{{- with $c.watchNamespace }}
- {{ printf "--watch-namespace=%s" . | quote }}
{{- end }}
{{- if and $c.publishService.enabled (or $c.publishService.pathOverride $c.service.enabled) }}
- {{ printf "--publish-service=%s" (default (printf "%s/%s" .Release.Namespace (include "ramjet.fullname" .)) $c.publishService.pathOverride) | quote }}
{{- else if $c.publishAddress }}
- {{ printf "--publish-address=%s" $c.publishAddress | quote }}
{{- end }}
{{- with $c.auditWebhook }}
- {{ printf "--audit-webhook=%s" . | quote }}
{{- end }}
{{- if .Values.fleet.enabled }}
{{- /* Canary promotion sums every replica's traffic, found through the fleet Service. */}}
- {{ printf "--peers=%s-fleet.%s.svc:%d" (include "ramjet.fullname" .) .Release.Namespace (int $c.containerPorts.admin) | quote }}
{{- end }}
{{- if include "ramjet.adminTokenSecret" . }}
- {{ printf "--admin-token-file=%s/token" (include "ramjet.adminTokenDir" .) | quote }}
{{- end }}
{{- if $c.defaultCertificate.secretName }}
- {{ printf "--default-certificate=%s/tls.crt" (include "ramjet.defaultCertDir" .) | quote }}
- {{ printf "--default-certificate-key=%s/tls.key" (include "ramjet.defaultCertDir" .) | quote }}
{{- end }}
{{- range $c.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
The pod template shared by the Deployment and the DaemonSet.
*/}}
{{- define "ramjet.podTemplate" -}}
{{- $c := .Values.controller }}
metadata:
  labels:
    {{- include "ramjet.selectorLabels" . | nindent 4 }}
    {{- with $c.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or $c.podAnnotations (and .Values.metrics.enabled .Values.metrics.scrapeAnnotations) }}
  annotations:
    {{- if and .Values.metrics.enabled .Values.metrics.scrapeAnnotations }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ $c.containerPorts.metrics | int | toString | quote }}
    prometheus.io/path: /metrics
    {{- end }}
    {{- with $c.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
spec:
  serviceAccountName: {{ include "ramjet.serviceAccountName" . }}
  automountServiceAccountToken: true
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- if $c.hostNetwork }}
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  terminationGracePeriodSeconds: {{ int $c.terminationGracePeriodSeconds }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ int $c.runAsUser }}
    runAsGroup: {{ int $c.runAsGroup }}
    fsGroup: {{ int $c.runAsGroup }}
    seccompProfile:
      {{- if $c.seccompOperator.enabled }}
      type: Localhost
      localhostProfile: {{ printf "operator/%s/%s.json" .Release.Namespace (include "ramjet.seccompProfileName" .) }}
      {{- else }}
      {{- toYaml $c.seccompProfile | nindent 6 }}
      {{- end }}
    {{- if and (include "ramjet.lowPorts" .) (not $c.hostNetwork) }}
    # Lets the non-root process bind the privileged ports it was given.
    sysctls:
      - name: net.ipv4.ip_unprivileged_port_start
        value: {{ include "ramjet.lowestPort" . | quote }}
    {{- end }}
  containers:
    - name: ramjet
      image: {{ include "ramjet.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        {{- include "ramjet.args" . | trim | nindent 8 }}
      env:
        # The namespace of the leader-election Lease.
        - name: RAMJET_POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        # The Lease holder identity.
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- with $c.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: http
          containerPort: {{ int $c.containerPorts.http }}
          protocol: TCP
        - name: https
          containerPort: {{ int $c.containerPorts.https }}
          protocol: TCP
        - name: metrics
          containerPort: {{ int $c.containerPorts.metrics }}
          protocol: TCP
        - name: admin
          containerPort: {{ int $c.containerPorts.admin }}
          protocol: TCP
        {{- range $c.service.tcpPorts }}
        - name: {{ .name | default (printf "tcp-%d" (int .port)) }}
          containerPort: {{ int .port }}
          protocol: TCP
        {{- end }}
      livenessProbe:
        {{- toYaml $c.livenessProbe | nindent 8 }}
      readinessProbe:
        {{- toYaml $c.readinessProbe | nindent 8 }}
      {{- with $c.lifecycle }}
      lifecycle:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: {{ int $c.runAsUser }}
        runAsGroup: {{ int $c.runAsGroup }}
        readOnlyRootFilesystem: true
        allowPrivilegeEscalation: false
        privileged: false
        capabilities:
          drop:
            - ALL
          {{- if include "ramjet.lowPorts" . }}
          add:
            - NET_BIND_SERVICE
          {{- end }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if include "ramjet.adminTokenSecret" . }}
        - name: admin-token
          mountPath: {{ include "ramjet.adminTokenDir" . }}
          readOnly: true
        {{- end }}
        {{- if $c.defaultCertificate.secretName }}
        - name: default-certificate
          mountPath: {{ include "ramjet.defaultCertDir" . }}
          readOnly: true
        {{- end }}
        {{- if include "ramjet.configMap" . }}
        - name: config
          mountPath: {{ include "ramjet.configDir" . }}
          readOnly: true
        {{- end }}
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: 16Mi
    {{- with include "ramjet.adminTokenSecret" . }}
    - name: admin-token
      secret:
        secretName: {{ . }}
        defaultMode: 288 # 0440: owner and group (fsGroup) may read
        items:
          - key: {{ include "ramjet.adminTokenKey" $ }}
            path: token
    {{- end }}
    {{- if $c.defaultCertificate.secretName }}
    - name: default-certificate
      secret:
        secretName: {{ $c.defaultCertificate.secretName }}
        defaultMode: 288 # 0440: owner and group (fsGroup) may read
        items:
          - key: tls.crt
            path: tls.crt
          - key: tls.key
            path: tls.key
    {{- end }}
    {{- with include "ramjet.configMap" . }}
    - name: config
      configMap:
        name: {{ . }}
    {{- end }}
  {{- with $c.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- else }}
  {{- if eq $c.kind "Deployment" }}
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          {{- include "ramjet.selectorLabels" . | nindent 10 }}
  {{- end }}
  {{- end }}
{{- end }}
