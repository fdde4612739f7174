package com.cloudbees.groovy.cps

import java.lang.annotation.ElementType
import java.lang.annotation.Retention
import java.lang.annotation.RetentionPolicy
import java.lang.annotation.Target

// Stands in for Jenkins' @NonCPS (workflow-cps) so the library compiles and
// runs outside Jenkins: plain Groovy runs everything "non-CPS" anyway.
@Retention(RetentionPolicy.RUNTIME)
@Target([ElementType.METHOD])
@interface NonCPS {}
