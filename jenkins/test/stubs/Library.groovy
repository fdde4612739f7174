import java.lang.annotation.Retention
import java.lang.annotation.RetentionPolicy

// Stands in for Jenkins' @Library('name') _ so the example Jenkinsfiles
// compile outside Jenkins.
@Retention(RetentionPolicy.SOURCE)
@interface Library { String[] value() }
