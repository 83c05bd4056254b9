{{/*
Helpers of the nvl72-operator chart. Every name is namespaced "nvl72-operator.*".
*/}}

{{/* Chart name, at most 63 characters. */}}
{{- define "nvl72-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name prefix of every resource: <release>-<chart>, or <release> if it contains the chart
name. Truncated to 50 characters so "<fullname>-scheduler-..." stays a valid name. */}}
{{- define "nvl72-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* chart label value: name-version */}}
{{- define "nvl72-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Common labels. */}}
{{- define "nvl72-operator.labels" -}}
helm.sh/chart: {{ include "nvl72-operator.chart" . }}
app.kubernetes.io/name: {{ include "nvl72-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nvl72-operator
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "operator"). */}}
{{- define "nvl72-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nvl72-operator.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* All labels of one component: (dict "ctx" $ "component" "operator"). */}}
{{- define "nvl72-operator.componentLabels" -}}
{{ include "nvl72-operator.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Name of a component's resources: the operator's are <fullname>, the others <fullname>-<component>.
(dict "ctx" $ "component" "extender") */}}
{{- define "nvl72-operator.componentName" -}}
{{- if eq .component "operator" -}}
{{- include "nvl72-operator.fullname" .ctx -}}
{{- else -}}
{{- printf "%s-%s" (include "nvl72-operator.fullname" .ctx) .component -}}
{{- end -}}
{{- end -}}

{{/* ServiceAccount name of a component: (dict "ctx" $ "component" "operator"). */}}
{{- define "nvl72-operator.serviceAccountName" -}}
{{- $sa := index .ctx.Values .component "serviceAccount" -}}
{{- if $sa.create -}}
{{- default (include "nvl72-operator.componentName" .) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{/* The operator/extender image reference. */}}
{{- define "nvl72-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Lease names. */}}
{{- define "nvl72-operator.operatorLease" -}}
{{- default (printf "%s-leader" (include "nvl72-operator.fullname" .)) .Values.operator.leaderElection.leaseName -}}
{{- end -}}
{{- define "nvl72-operator.schedulerLease" -}}
{{- default (printf "%s-scheduler" (include "nvl72-operator.fullname" .)) .Values.scheduler.leaderElection.leaseName -}}
{{- end -}}

{{/* URL scheme of the extender. */}}
{{- define "nvl72-operator.extenderScheme" -}}
{{- if .Values.extender.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* Default affinity: prefer one replica per node. (dict "ctx" $ "component" "operator" "affinity" .Values.x.affinity) */}}
{{- define "nvl72-operator.affinity" -}}
{{- if .affinity -}}
{{ toYaml .affinity }}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "nvl72-operator.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 12 }}
{{- end -}}
{{- end -}}

{{/* imagePullSecrets block; use only when .Values.imagePullSecrets is not empty. */}}
{{- define "nvl72-operator.imagePullSecrets" -}}
imagePullSecrets:
{{- range .Values.imagePullSecrets }}
  - name: {{ . }}
{{- end }}
{{- end -}}
